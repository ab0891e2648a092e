// The interface every selector implements: choosing among the items of a
// table addressed by slot. The owner keeps its items densely in slots
// 0..size()-1, appends new items at the end and fills a hole left by a
// removed item with its last item. The selector mirrors those moves, so it
// needs no map from item keys to its own state: a table keeps one such map
// for itself and both of its selectors (see Table), and ItemSelector adds a
// map for standalone use by key.
//
// Selectors are not thread-safe: the owning table calls them under its lock.
#ifndef RESOUND_SELECTORS_SLOT_SELECTOR_H_
#define RESOUND_SELECTORS_SLOT_SELECTOR_H_

#include <cstddef>
#include <cstdint>
#include <limits>

#include "resound/selectors/selector_options.h"

namespace resound {

// The slot a selector chose and the probability with which it chose it.
struct SlotSelection {
  size_t slot = 0;
  double probability = 0.0;
};

class SlotSelector {
 public:
  // Slots are stored in 32 bits by the selectors that keep per-slot state.
  static constexpr size_t kMaxSlots = std::numeric_limits<uint32_t>::max();

  virtual ~SlotSelector() = default;

  // Throws InvalidArgumentError if this selector cannot hold `priority`.
  // Owners call it before changing anything, and the methods below take
  // priorities that passed it: they never fail half-way through an
  // operation of the owner.
  virtual void ValidatePriority(double priority) const;

  // A new item takes slot size(). Throws FailedPreconditionError when
  // size() == kMaxSlots (and only then, apart from std::bad_alloc).
  virtual void Append(double priority) = 0;
  virtual void Update(size_t slot, double priority) = 0;
  // The item in `slot` leaves; the item in the last slot, if that is another
  // one, moves into `slot`.
  virtual void Remove(size_t slot) = 0;
  // Chooses a slot; throws FailedPreconditionError when empty.
  virtual SlotSelection Sample() = 0;
  // `count` independent choices from the current state (the same as calling
  // Sample() `count` times); selectors override it when batching is faster.
  virtual void SampleMany(size_t count, SlotSelection* out);
  // The probability with which Sample() would choose `slot` now.
  virtual double Probability(size_t slot) const = 0;
  virtual void Clear() noexcept = 0;
  virtual size_t size() const noexcept = 0;
  virtual SelectorOptions options() const = 0;

  // Where `slot` stands among items of equal priority: a number that grows
  // with every insert or update of an item, for selectors whose choice
  // depends on it (heaps: the oldest wins a tie), 0 for the others (their
  // order follows the slots' insertion order or nothing at all). A
  // checkpoint keeps it; updating items in its order after a restore puts
  // them back in the same order.
  virtual uint64_t TieOrder(size_t slot) const noexcept;

 protected:
  SlotSelector() = default;
  SlotSelector(const SlotSelector&) = delete;
  SlotSelector& operator=(const SlotSelector&) = delete;

  // Throws FailedPreconditionError when `size` slots are all there can be.
  static void CheckRoom(size_t size);
  // Throws FailedPreconditionError: Sample() on an empty selector.
  [[noreturn]] static void ThrowEmpty();
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_SLOT_SELECTOR_H_

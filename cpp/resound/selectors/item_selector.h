// A selector addressed by item key, for standalone use (the Python
// resound._core.ItemSelector, tests): a SlotSelector plus the map from keys
// to slots that a Table keeps for itself. Behaves exactly like the slot
// selector inside a table that sees the same inserts, updates and deletes.
// Not thread-safe.
#ifndef RESOUND_SELECTORS_ITEM_SELECTOR_H_
#define RESOUND_SELECTORS_ITEM_SELECTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "resound/key_map.h"
#include "resound/page_allocator.h"
#include "resound/selectors/selector_options.h"
#include "resound/selectors/slot_selector.h"

namespace resound {

// The key a selector chose and the probability with which it chose it.
struct Selection {
  uint64_t key = 0;
  double probability = 0.0;
};

class ItemSelector {
 public:
  explicit ItemSelector(std::unique_ptr<SlotSelector> slots) noexcept;
  virtual ~ItemSelector() = default;
  ItemSelector(const ItemSelector&) = delete;
  ItemSelector& operator=(const ItemSelector&) = delete;

  // Throws InvalidArgumentError if this selector cannot hold `priority`.
  void ValidatePriority(double priority) const { slots_->ValidatePriority(priority); }

  // Insert throws InvalidArgumentError for a key already present (or a bad
  // priority); Update and Delete throw NotFoundError for a missing key.
  void Insert(uint64_t key, double priority);
  void Update(uint64_t key, double priority);
  void Delete(uint64_t key);
  // Chooses a key; throws FailedPreconditionError when empty.
  Selection Sample();
  void Clear() noexcept;
  size_t size() const noexcept { return keys_.size(); }
  bool Contains(uint64_t key) const noexcept { return index_.Contains(key); }
  SelectorOptions options() const { return slots_->options(); }

 protected:
  const SlotSelector& slots() const noexcept { return *slots_; }
  // The slot of `key`; throws NotFoundError naming the key.
  size_t SlotOf(uint64_t key) const;

 private:
  std::unique_ptr<SlotSelector> slots_;
  PageVector<uint64_t> keys_;  // slot -> key
  KeyMap<uint32_t, KeyMapMaxIsEmpty> index_;  // key -> slot (slots stay below kMaxSlots)
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_ITEM_SELECTOR_H_

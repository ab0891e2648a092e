// Fifo and Lifo: chooses the oldest (Fifo) or newest (Lifo) inserted item.
// Updates keep an item's place.
//
// The order lives in one array of slots, oldest first, where a removed item
// leaves a gap; the first and last entries are always live, so sampling is
// O(1). Each slot knows its entry, so removing any item is O(1) too. Gaps are
// squeezed out once they outnumber the live entries (amortised O(1)). That
// costs 8-12 bytes per item, where a linked list costs a 32-byte node plus a
// map entry.
#ifndef RESOUND_SELECTORS_INSERTION_ORDER_SELECTOR_H_
#define RESOUND_SELECTORS_INSERTION_ORDER_SELECTOR_H_

#include <cstdint>
#include <vector>

#include "resound/page_allocator.h"
#include "resound/selectors/slot_selector.h"

namespace resound {

class InsertionOrderSelector final : public SlotSelector {
 public:
  enum class Order { kOldestFirst, kNewestFirst };
  explicit InsertionOrderSelector(Order order) noexcept : order_(order) {}

  void Append(double priority) override;
  void Update(size_t slot, double priority) override;
  void Remove(size_t slot) override;
  SlotSelection Sample() override;
  double Probability(size_t slot) const override;
  void Clear() noexcept override;
  size_t size() const noexcept override { return entry_of_.size(); }
  SelectorOptions options() const override;

 private:
  static constexpr uint32_t kGap = UINT32_MAX;
  // Entries kept however few gaps there are: below this, squeezing would
  // cost more than it saves.
  static constexpr size_t kMinEntriesToCompact = 64;

  size_t Chosen() const noexcept { return order_ == Order::kOldestFirst ? head_ : entries_.size() - 1; }
  void Compact();

  Order order_;
  // Slots in insertion order, kGap where an item was removed. entries_[head_]
  // and entries_.back() are live whenever the selector is not empty, and
  // every entry before head_ is a gap.
  PageVector<uint32_t> entries_;
  size_t head_ = 0;
  PageVector<uint32_t> entry_of_;  // slot -> its index in entries_
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_INSERTION_ORDER_SELECTOR_H_

// MinHeap / MaxHeap: chooses the item with the lowest (min) or highest (max)
// priority; among equal priorities, the one least recently inserted or
// updated. An indexed binary heap makes insert, update, delete of any item
// O(log n) and sample O(1); each slot knows its node's place in the heap.
#ifndef RESOUND_SELECTORS_HEAP_SELECTOR_H_
#define RESOUND_SELECTORS_HEAP_SELECTOR_H_

#include <cstdint>
#include <vector>

#include "resound/page_allocator.h"
#include "resound/selectors/slot_selector.h"

namespace resound {

class HeapSelector final : public SlotSelector {
 public:
  explicit HeapSelector(bool min_heap) noexcept : sign_(min_heap ? 1.0 : -1.0) {}

  void Append(double priority) override;
  void Update(size_t slot, double priority) override;
  void Remove(size_t slot) override;
  SlotSelection Sample() override;
  double Probability(size_t slot) const override;
  void Clear() noexcept override;
  size_t size() const noexcept override { return heap_.size(); }
  SelectorOptions options() const override;
  uint64_t TieOrder(size_t slot) const noexcept override { return heap_[position_[slot]].stamp + 1; }

 private:
  struct Node {
    double rank;     // sign * priority: the heap is always a min-heap on rank
    uint64_t stamp;  // when inserted or last updated: ties go to the oldest
    uint32_t slot;
  };
  static bool Before(const Node& a, const Node& b) noexcept {
    return a.rank < b.rank || (a.rank == b.rank && a.stamp < b.stamp);
  }
  void Place(size_t index) noexcept;  // records heap_[index]'s position
  void SiftUp(size_t index) noexcept;
  void SiftDown(size_t index) noexcept;
  void Restore(size_t index) noexcept;  // sifts whichever way is needed

  double sign_;
  uint64_t next_stamp_ = 0;
  PageVector<Node> heap_;
  PageVector<uint32_t> position_;  // slot -> index in heap_
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_HEAP_SELECTOR_H_

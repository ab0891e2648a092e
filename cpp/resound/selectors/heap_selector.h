// MinHeap / MaxHeap: chooses the item with the lowest (min) or highest (max)
// priority; among equal priorities, the one least recently inserted or
// updated. An indexed binary heap makes insert, update, delete of any key
// O(log n) and sample O(1).
#ifndef RESOUND_SELECTORS_HEAP_SELECTOR_H_
#define RESOUND_SELECTORS_HEAP_SELECTOR_H_

#include <vector>

#include "resound/key_map.h"
#include "resound/selectors/item_selector.h"

namespace resound {

class HeapSelector final : public ItemSelector {
 public:
  explicit HeapSelector(bool min_heap) noexcept : sign_(min_heap ? 1.0 : -1.0) {}

  void Insert(uint64_t key, double priority) override;
  void Update(uint64_t key, double priority) override;
  void Delete(uint64_t key) override;
  Selection Sample() override;
  void Clear() noexcept override;
  size_t size() const noexcept override { return heap_.size(); }
  bool Contains(uint64_t key) const noexcept override { return position_.Contains(key); }
  SelectorOptions options() const override;

 private:
  struct Node {
    double rank;     // sign * priority: the heap is always a min-heap on rank
    uint64_t stamp;  // when inserted or last updated: ties go to the oldest
    uint64_t key;
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
  std::vector<Node> heap_;
  KeyMap<size_t> position_;  // key -> index in heap_
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_HEAP_SELECTOR_H_

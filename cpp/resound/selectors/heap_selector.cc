#include "resound/selectors/heap_selector.h"

#include <utility>

namespace resound {

void HeapSelector::Place(size_t index) noexcept { position_[heap_[index].slot] = static_cast<uint32_t>(index); }

void HeapSelector::SiftUp(size_t index) noexcept {
  while (index > 0) {
    const size_t parent = (index - 1) / 2;
    if (!Before(heap_[index], heap_[parent])) break;
    std::swap(heap_[index], heap_[parent]);
    Place(index);
    index = parent;
  }
  Place(index);
}

void HeapSelector::SiftDown(size_t index) noexcept {
  const size_t n = heap_.size();
  while (true) {
    size_t best = index;
    const size_t left = 2 * index + 1;
    const size_t right = left + 1;
    if (left < n && Before(heap_[left], heap_[best])) best = left;
    if (right < n && Before(heap_[right], heap_[best])) best = right;
    if (best == index) break;
    std::swap(heap_[index], heap_[best]);
    Place(index);
    index = best;
  }
  Place(index);
}

void HeapSelector::Restore(size_t index) noexcept {
  if (index > 0 && Before(heap_[index], heap_[(index - 1) / 2])) {
    SiftUp(index);
  } else {
    SiftDown(index);
  }
}

void HeapSelector::Append(double priority) {
  const size_t slot = heap_.size();
  CheckRoom(slot);
  heap_.push_back({sign_ * priority, next_stamp_, static_cast<uint32_t>(slot)});
  try {
    position_.push_back(static_cast<uint32_t>(slot));
  } catch (...) {
    heap_.pop_back();  // leave the selector as it was
    throw;
  }
  ++next_stamp_;
  SiftUp(slot);
}

void HeapSelector::Update(size_t slot, double priority) {
  const size_t index = position_[slot];
  // Every update refreshes recency, even when the priority is unchanged.
  heap_[index].rank = sign_ * priority;
  heap_[index].stamp = next_stamp_++;
  Restore(index);
}

void HeapSelector::Remove(size_t slot) {
  // Take the slot's node out of the heap...
  const size_t index = position_[slot];
  const size_t last = heap_.size() - 1;
  if (index != last) {
    heap_[index] = heap_[last];
    heap_.pop_back();
    Restore(index);
  } else {
    heap_.pop_back();
  }
  // ...then renumber the last slot's node, which the owner moves into `slot`.
  const size_t last_slot = position_.size() - 1;
  if (slot != last_slot) {
    const uint32_t moved = position_[last_slot];
    heap_[moved].slot = static_cast<uint32_t>(slot);
    position_[slot] = moved;
  }
  position_.pop_back();
}

SlotSelection HeapSelector::Sample() {
  if (heap_.empty()) ThrowEmpty();
  return {heap_.front().slot, 1.0};
}

double HeapSelector::Probability(size_t slot) const {
  return !heap_.empty() && heap_.front().slot == slot ? 1.0 : 0.0;
}

void HeapSelector::Clear() noexcept {
  heap_.clear();
  position_.clear();
  next_stamp_ = 0;
}

SelectorOptions HeapSelector::options() const {
  return {sign_ > 0 ? SelectorKind::kMinHeap : SelectorKind::kMaxHeap, 0.0, std::nullopt};
}

}  // namespace resound

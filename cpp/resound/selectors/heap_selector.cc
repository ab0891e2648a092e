#include "resound/selectors/heap_selector.h"

#include <string>
#include <utility>

#include "resound/errors.h"

namespace resound {

void HeapSelector::Place(size_t index) noexcept { *position_.Find(heap_[index].key) = index; }

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

void HeapSelector::Insert(uint64_t key, double priority) {
  ValidatePriority(priority);
  if (Contains(key)) throw InvalidArgumentError("key " + std::to_string(key) + " is already in the selector");
  position_.TryEmplace(key, heap_.size());
  heap_.push_back({sign_ * priority, next_stamp_++, key});
  SiftUp(heap_.size() - 1);
}

void HeapSelector::Update(uint64_t key, double priority) {
  ValidatePriority(priority);
  const size_t* position = position_.Find(key);
  if (position == nullptr) throw NotFoundError("key " + std::to_string(key) + " is not in the selector");
  const size_t index = *position;
  // Every update refreshes recency, even when the priority is unchanged.
  heap_[index].rank = sign_ * priority;
  heap_[index].stamp = next_stamp_++;
  Restore(index);
}

void HeapSelector::Delete(uint64_t key) {
  const size_t* position = position_.Find(key);
  if (position == nullptr) throw NotFoundError("key " + std::to_string(key) + " is not in the selector");
  const size_t index = *position;
  position_.Erase(key);
  const size_t last = heap_.size() - 1;
  if (index != last) {
    heap_[index] = heap_[last];
    heap_.pop_back();
    Restore(index);
  } else {
    heap_.pop_back();
  }
}

Selection HeapSelector::Sample() {
  if (heap_.empty()) throw FailedPreconditionError("cannot sample from an empty selector");
  return {heap_.front().key, 1.0};
}

void HeapSelector::Clear() noexcept {
  heap_.clear();
  position_.Clear();
  next_stamp_ = 0;
}

SelectorOptions HeapSelector::options() const {
  return {sign_ > 0 ? SelectorKind::kMinHeap : SelectorKind::kMaxHeap, 0.0, std::nullopt};
}

}  // namespace resound

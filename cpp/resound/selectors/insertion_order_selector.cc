#include "resound/selectors/insertion_order_selector.h"

#include <string>

#include "resound/errors.h"

namespace resound {

void InsertionOrderSelector::Insert(uint64_t key, double priority) {
  ValidatePriority(priority);
  if (Contains(key)) throw InvalidArgumentError("key " + std::to_string(key) + " is already in the selector");
  keys_.push_back(key);
  index_.TryEmplace(key, std::prev(keys_.end()));
}

void InsertionOrderSelector::Update(uint64_t key, double priority) {
  ValidatePriority(priority);
  if (!Contains(key)) throw NotFoundError("key " + std::to_string(key) + " is not in the selector");
}

void InsertionOrderSelector::Delete(uint64_t key) {
  auto* position = index_.Find(key);
  if (position == nullptr) throw NotFoundError("key " + std::to_string(key) + " is not in the selector");
  keys_.erase(*position);
  index_.Erase(key);
}

Selection InsertionOrderSelector::Sample() {
  if (keys_.empty()) throw FailedPreconditionError("cannot sample from an empty selector");
  return {order_ == Order::kOldestFirst ? keys_.front() : keys_.back(), 1.0};
}

void InsertionOrderSelector::Clear() noexcept {
  keys_.clear();
  index_.Clear();
}

SelectorOptions InsertionOrderSelector::options() const {
  return {order_ == Order::kOldestFirst ? SelectorKind::kFifo : SelectorKind::kLifo, 0.0, std::nullopt};
}

}  // namespace resound

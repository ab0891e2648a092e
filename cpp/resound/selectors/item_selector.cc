#include "resound/selectors/item_selector.h"

#include <string>

#include "resound/errors.h"

namespace resound {

ItemSelector::ItemSelector(std::unique_ptr<SlotSelector> slots) noexcept : slots_(std::move(slots)) {}

size_t ItemSelector::SlotOf(uint64_t key) const {
  const uint32_t* slot = index_.Find(key);
  if (slot == nullptr) throw NotFoundError("key " + std::to_string(key) + " is not in the selector");
  return *slot;
}

void ItemSelector::Insert(uint64_t key, double priority) {
  ValidatePriority(priority);
  if (Contains(key)) throw InvalidArgumentError("key " + std::to_string(key) + " is already in the selector");
  const size_t slot = keys_.size();
  // Each step either succeeds or throws with nothing changed; undo the
  // earlier steps if a later one throws (allocation, or a full selector).
  slots_->Append(priority);
  try {
    keys_.push_back(key);
    try {
      index_.TryEmplace(key, static_cast<uint32_t>(slot));
    } catch (...) {
      keys_.pop_back();
      throw;
    }
  } catch (...) {
    slots_->Remove(slot);
    throw;
  }
}

void ItemSelector::Update(uint64_t key, double priority) {
  ValidatePriority(priority);
  slots_->Update(SlotOf(key), priority);
}

void ItemSelector::Delete(uint64_t key) {
  const size_t slot = SlotOf(key);
  slots_->Remove(slot);
  const size_t last = keys_.size() - 1;
  if (slot != last) {
    keys_[slot] = keys_[last];
    *index_.Find(keys_[slot]) = static_cast<uint32_t>(slot);
  }
  keys_.pop_back();
  index_.Erase(key);
}

Selection ItemSelector::Sample() {
  const SlotSelection selection = slots_->Sample();
  return {keys_[selection.slot], selection.probability};
}

void ItemSelector::Clear() noexcept {
  slots_->Clear();
  keys_.clear();
  index_.Clear();
}

}  // namespace resound

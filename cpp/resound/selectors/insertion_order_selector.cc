#include "resound/selectors/insertion_order_selector.h"

namespace resound {

void InsertionOrderSelector::Append(double) {
  const size_t slot = entry_of_.size();
  CheckRoom(slot);
  entries_.push_back(static_cast<uint32_t>(slot));
  try {
    entry_of_.push_back(static_cast<uint32_t>(entries_.size() - 1));
  } catch (...) {
    entries_.pop_back();  // leave the selector as it was
    throw;
  }
}

void InsertionOrderSelector::Update(size_t, double) {}

void InsertionOrderSelector::Remove(size_t slot) {
  const size_t entry = entry_of_[slot];
  entries_[entry] = kGap;
  const size_t last = entry_of_.size() - 1;
  if (slot != last) {
    entries_[entry_of_[last]] = static_cast<uint32_t>(slot);
    entry_of_[slot] = entry_of_[last];
  }
  entry_of_.pop_back();
  // Restore the invariant: live entries at both ends (or no entries).
  while (!entries_.empty() && entries_.back() == kGap) entries_.pop_back();
  if (entries_.empty()) {
    head_ = 0;
    return;
  }
  while (entries_[head_] == kGap) ++head_;
  const size_t gaps = entries_.size() - entry_of_.size();
  if (gaps > entry_of_.size() && entries_.size() >= kMinEntriesToCompact) Compact();
}

void InsertionOrderSelector::Compact() {
  size_t out = 0;
  for (size_t i = head_; i < entries_.size(); ++i) {
    const uint32_t slot = entries_[i];
    if (slot == kGap) continue;
    entries_[out] = slot;
    entry_of_[slot] = static_cast<uint32_t>(out);
    ++out;
  }
  entries_.resize(out);
  head_ = 0;
}

SlotSelection InsertionOrderSelector::Sample() {
  if (entries_.empty()) ThrowEmpty();
  return {entries_[Chosen()], 1.0};
}

double InsertionOrderSelector::Probability(size_t slot) const {
  return !entries_.empty() && entries_[Chosen()] == slot ? 1.0 : 0.0;
}

void InsertionOrderSelector::Clear() noexcept {
  PageVector<uint32_t>().swap(entries_);
  PageVector<uint32_t>().swap(entry_of_);
  head_ = 0;
}

SelectorOptions InsertionOrderSelector::options() const {
  return {order_ == Order::kOldestFirst ? SelectorKind::kFifo : SelectorKind::kLifo, 0.0, std::nullopt};
}

}  // namespace resound

#include "resound/local/spin_budget.h"

#include <algorithm>

namespace resound::local {

SpinBudget::SpinBudget(std::chrono::nanoseconds floor, std::chrono::nanoseconds ceiling) noexcept
    : floor_(floor), ceiling_(std::max(floor, ceiling)) {}

std::chrono::nanoseconds SpinBudget::Next() const noexcept {
  if (last_gap_ > ceiling_) return floor_;
  return std::min(ceiling_, 2 * last_gap_ + floor_);
}

}  // namespace resound::local

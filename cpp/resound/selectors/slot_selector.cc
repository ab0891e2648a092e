#include "resound/selectors/slot_selector.h"

#include <cmath>
#include <sstream>
#include <string>

#include "resound/errors.h"

namespace resound {

void SlotSelector::ValidatePriority(double priority) const {
  if (!std::isfinite(priority)) {
    std::ostringstream message;
    message << "priority must be a finite number, got " << priority;
    throw InvalidArgumentError(message.str());
  }
}

void SlotSelector::SampleMany(size_t count, SlotSelection* out) {
  for (size_t i = 0; i < count; ++i) out[i] = Sample();
}

void SlotSelector::CheckRoom(size_t size) {
  if (size >= kMaxSlots) {
    throw FailedPreconditionError("a selector holds at most " + std::to_string(kMaxSlots) + " items");
  }
}

void SlotSelector::ThrowEmpty() { throw FailedPreconditionError("cannot sample from an empty selector"); }

uint64_t SlotSelector::TieOrder(size_t /*slot*/) const noexcept { return 0; }

}  // namespace resound

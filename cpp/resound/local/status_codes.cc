#include "resound/local/status_codes.h"

#include "resound/errors.h"

namespace resound::local {

uint32_t StatusCodeOf(const std::exception& error) noexcept {
  if (const auto* status = dynamic_cast<const StatusError*>(&error)) return status->code();
  if (dynamic_cast<const InvalidArgumentError*>(&error) != nullptr) return kInvalidArgument;
  if (dynamic_cast<const NotFoundError*>(&error) != nullptr) return kNotFound;
  if (dynamic_cast<const DeadlineExceededError*>(&error) != nullptr) return kDeadlineExceeded;
  if (dynamic_cast<const CancelledError*>(&error) != nullptr) return kCancelled;
  if (dynamic_cast<const FailedPreconditionError*>(&error) != nullptr) return kFailedPrecondition;
  if (dynamic_cast<const DataLossError*>(&error) != nullptr) return kDataLoss;
  return kUnknown;
}

}  // namespace resound::local

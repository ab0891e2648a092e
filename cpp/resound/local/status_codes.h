// The status codes a local call fails with: gRPC's numbers, so that both
// transports raise the same Python errors for the same failures.
#ifndef RESOUND_LOCAL_STATUS_CODES_H_
#define RESOUND_LOCAL_STATUS_CODES_H_

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>

namespace resound::local {

enum StatusCode : uint32_t {
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};

// A call the other side answered with an error frame (or that the
// transport failed): its status code and message.
class StatusError : public std::runtime_error {
 public:
  StatusError(uint32_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  uint32_t code() const noexcept { return code_; }

 private:
  uint32_t code_;
};

// The code of the core's exception types (resound/errors.h); kUnknown for others.
// (a StatusError: its own code).
uint32_t StatusCodeOf(const std::exception& error) noexcept;

}  // namespace resound::local

#endif  // RESOUND_LOCAL_STATUS_CODES_H_

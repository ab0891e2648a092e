// Error types thrown by the core. The bindings translate each one into a
// Python exception (see cpp/bindings/register_errors.cc), so every message
// names the argument or object at fault.
#ifndef RESOUND_ERRORS_H_
#define RESOUND_ERRORS_H_

#include <exception>
#include <stdexcept>
#include <string>

namespace resound {

// A caller passed a value outside what the operation allows (-> ValueError).
class InvalidArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A key (item, chunk) that is not there (-> KeyError).
class NotFoundError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A blocking call ran out of time before it could do anything
// (-> resound._core.DeadlineExceededError).
class DeadlineExceededError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The table was closed while the call waited or before it started
// (-> resound._core.CancelledError).
class CancelledError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The object is in a state that does not allow the call (-> RuntimeError).
class FailedPreconditionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Stored data that cannot be trusted: a checkpoint that is truncated,
// corrupted, of another format or of an unknown version
// (-> resound._core.CheckpointError, a ValueError).
class DataLossError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether `error` holds a DeadlineExceededError (a batch result's error: the
// rest waits for a rate limiter, as opposed to a failure).
inline bool IsDeadlineExceeded(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const DeadlineExceededError&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace resound

#endif  // RESOUND_ERRORS_H_

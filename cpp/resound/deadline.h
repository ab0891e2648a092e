// A point in time after which a blocking call gives up. "Never" is its own
// state rather than a far-away time point so that no arithmetic can overflow.
#ifndef RESOUND_DEADLINE_H_
#define RESOUND_DEADLINE_H_

#include <chrono>
#include <optional>

namespace resound {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // Waits forever.
  static Deadline Never() noexcept { return Deadline(std::nullopt); }
  // Expires `seconds` from now; 0 means "do not wait at all". Throws
  // InvalidArgumentError for negative or non-finite values.
  static Deadline AfterSeconds(double seconds);
  // Builds from an optional timeout in seconds: nullopt waits forever.
  static Deadline FromTimeout(std::optional<double> seconds);

  bool is_infinite() const noexcept { return !when_.has_value(); }
  bool has_passed() const noexcept { return when_.has_value() && Clock::now() >= *when_; }
  // Only meaningful when !is_infinite().
  Clock::time_point time_point() const noexcept { return when_.value_or(Clock::time_point::max()); }

 private:
  explicit Deadline(std::optional<Clock::time_point> when) noexcept : when_(when) {}
  std::optional<Clock::time_point> when_;
};

}  // namespace resound

#endif  // RESOUND_DEADLINE_H_

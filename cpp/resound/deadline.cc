#include "resound/deadline.h"

#include <cmath>
#include <string>

#include "resound/errors.h"

namespace resound {

Deadline Deadline::AfterSeconds(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    throw InvalidArgumentError("timeout must be None or a finite number of seconds >= 0, got " +
                               std::to_string(seconds));
  }
  // Timeouts beyond a year are treated as "forever": it avoids overflowing
  // steady_clock arithmetic and no caller can tell the difference.
  constexpr double kOneYear = 365.0 * 24 * 3600;
  if (seconds > kOneYear) return Never();
  // "Do not wait" has passed already: no need to read the clock (the
  // writers' non-waiting inserts ask for it once per call).
  if (seconds == 0) return Deadline(Clock::time_point::min());
  const auto delta = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(seconds));
  return Deadline(Clock::now() + delta);
}

Deadline Deadline::FromTimeout(std::optional<double> seconds) {
  return seconds.has_value() ? AfterSeconds(*seconds) : Never();
}

}  // namespace resound

#include "resound/rate_limiter.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <string_view>
#include <utility>

#include "resound/errors.h"

namespace resound {
namespace {

constexpr double kMaxDouble = std::numeric_limits<double>::max();

[[noreturn]] void Invalid(const std::ostringstream& message) {
  throw InvalidArgumentError(message.str());
}

void CheckCount(int64_t n) {
  if (n < 1) throw InvalidArgumentError("n must be >= 1, got " + std::to_string(n));
}

}  // namespace

void RateLimiterConfig::Validate() const {
  std::ostringstream message;
  if (!std::isfinite(samples_per_insert) || samples_per_insert <= 0) {
    message << "samples_per_insert must be a finite number > 0, got " << samples_per_insert;
    Invalid(message);
  }
  if (min_size_to_sample < 1) {
    message << "min_size_to_sample must be >= 1, got " << min_size_to_sample;
    Invalid(message);
  }
  if (std::isnan(min_diff) || std::isnan(max_diff)) {
    message << "min_diff and max_diff must not be NaN, got " << min_diff << " and " << max_diff;
    Invalid(message);
  }
  if (min_diff > max_diff) {
    message << "min_diff (" << min_diff << ") must be <= max_diff (" << max_diff << ")";
    Invalid(message);
  }
}

std::string RateLimiterConfig::ToString() const {
  std::ostringstream out;
  out << "RateLimiter(samples_per_insert=" << samples_per_insert
      << ", min_size_to_sample=" << min_size_to_sample << ", min_diff=" << min_diff
      << ", max_diff=" << max_diff << ")";
  return out.str();
}

namespace {

// Numbers as a user writes them: 4 not 4.000000, 0.5 not 5e-01.
std::string Number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

std::string RateLimiterConfig::Kind() const {
  if (!kind.empty()) return kind;
  if (samples_per_insert == 1.0 && min_diff == -kMaxDouble && max_diff == kMaxDouble) {
    return "MinSize(" + std::to_string(min_size_to_sample) + ")";
  }
  if (samples_per_insert == 1.0 && min_size_to_sample == 1 && min_diff == 0.0 && max_diff >= 1.0 &&
      max_diff == std::floor(max_diff) && max_diff < 9.0e15) {
    return "Queue(" + std::to_string(static_cast<int64_t>(max_diff)) + ")";
  }
  return ToString();
}

RateLimiterConfig RateLimiterConfig::MinSize(int64_t min_size_to_sample) {
  if (min_size_to_sample < 1) {
    throw InvalidArgumentError("min_size_to_sample must be >= 1, got " + std::to_string(min_size_to_sample));
  }
  return {1.0, min_size_to_sample, -kMaxDouble, kMaxDouble, "MinSize(" + std::to_string(min_size_to_sample) + ")"};
}

RateLimiterConfig RateLimiterConfig::SampleToInsertRatio(double samples_per_insert,
                                                         int64_t min_size_to_sample,
                                                         double error_buffer) {
  const double offset = samples_per_insert * static_cast<double>(min_size_to_sample);
  RateLimiterConfig config = SampleToInsertRatio(samples_per_insert, min_size_to_sample,
                                                 {offset - error_buffer, offset + error_buffer});
  config.kind = "SampleToInsertRatio(samples_per_insert=" + Number(samples_per_insert) +
                ", min_size_to_sample=" + std::to_string(min_size_to_sample) +
                ", error_buffer=" + Number(error_buffer) + ")";
  return config;
}

RateLimiterConfig RateLimiterConfig::SampleToInsertRatio(double samples_per_insert,
                                                         int64_t min_size_to_sample,
                                                         std::pair<double, double> error_buffer) {
  const auto [min_diff, max_diff] = error_buffer;
  std::ostringstream message;
  // Same checks, in the same order, as Reverb's SampleToInsertRatio.
  if (!std::isfinite(samples_per_insert) || samples_per_insert <= 0) {
    message << "samples_per_insert must be a finite number > 0, got " << samples_per_insert;
    Invalid(message);
  }
  if (std::isnan(min_diff) || std::isnan(max_diff)) {
    message << "error_buffer must not contain NaN, got (" << min_diff << ", " << max_diff << ")";
    Invalid(message);
  }
  const double required = 2 * std::max(1.0, samples_per_insert);
  if (max_diff - min_diff < required) {
    message << "error_buffer must allow a range of at least 2 * max(1, samples_per_insert) = "
            << required << " (so that both inserts and samples can make progress); got range ["
            << min_diff << ", " << max_diff << "]";
    Invalid(message);
  }
  const double offset = samples_per_insert * static_cast<double>(min_size_to_sample);
  if (min_diff > offset) {
    message << "error_buffer lower bound (min_diff " << min_diff
            << ") must be <= samples_per_insert * min_size_to_sample = " << offset
            << ", otherwise sampling can never start";
    Invalid(message);
  }
  if (min_size_to_sample < 1) {
    message << "min_size_to_sample must be >= 1, got " << min_size_to_sample;
    Invalid(message);
  }
  return {samples_per_insert, min_size_to_sample, min_diff, max_diff,
          "SampleToInsertRatio(samples_per_insert=" + Number(samples_per_insert) +
              ", min_size_to_sample=" + std::to_string(min_size_to_sample) + ", error_buffer=(" +
              Number(min_diff) + ", " + Number(max_diff) + "))"};
}

RateLimiterConfig RateLimiterConfig::Queue(int64_t size) {
  if (size < 1) throw InvalidArgumentError("size must be >= 1, got " + std::to_string(size));
  return {1.0, 1, 0.0, static_cast<double>(size), "Queue(" + std::to_string(size) + ")"};
}

RateLimiterConfig RateLimiterConfig::Stack(int64_t size) {
  RateLimiterConfig config = Queue(size);
  config.kind = "Stack(" + std::to_string(size) + ")";
  return config;
}

RateLimiter::RateLimiter(RateLimiterConfig config, std::string table_name)
    : config_(config), table_name_(std::move(table_name)) {
  config_.Validate();
}

std::string RateLimiter::WhyBlocked(bool insert) const {
  std::ostringstream out;
  // A limiter of no table (one made on its own, to try numbers) says so.
  const std::string table = table_name_.empty() ? "the table" : "table '" + table_name_ + "'";
  const int64_t size = counters_.inserts - counters_.deletes;
  const auto plural = [](int64_t n, const char* word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
  };
  if (!insert && size < config_.min_size_to_sample) {
    out << table << " has " << plural(size, "item") << "; " << config_.Kind()
        << " needs " << config_.min_size_to_sample << " before sampling";
    if (size > 0) out << " (" << plural(config_.min_size_to_sample - size, "more insert") << ")";
    return out.str();
  }
  // The smallest count of the other side's calls that would let one more
  // through (the inverse of AllowsInserts and AllowsSamples).
  const double spi = config_.samples_per_insert;
  const auto inserts = static_cast<double>(counters_.inserts);
  const auto samples = static_cast<double>(counters_.samples);
  double needed;
  if (insert) {
    needed = std::ceil((inserts + 1) * spi - samples - config_.max_diff);
  } else {
    needed = std::ceil((config_.min_diff + samples + 1) / spi - inserts);
  }
  const auto count = static_cast<int64_t>(std::max(1.0, needed));
  out << table << ": " << config_.Kind() << " needs "
      << plural(count, insert ? "more sample" : "more insert") << " before "
      << (insert ? "inserting" : "sampling") << " (" << plural(size, "item") << ", "
      << plural(counters_.inserts, "insert") << " and " << plural(counters_.samples, "sample")
      << " so far)";
  return out.str();
}

bool RateLimiter::AllowsInserts(int64_t n) const noexcept {
  if (counters_.inserts + n - counters_.deletes <= config_.min_size_to_sample) return true;
  return static_cast<double>(counters_.inserts + n) * config_.samples_per_insert -
             static_cast<double>(counters_.samples) <=
         config_.max_diff;
}

bool RateLimiter::AllowsSamples(int64_t n) const noexcept {
  if (counters_.inserts - counters_.deletes < config_.min_size_to_sample) return false;
  return static_cast<double>(counters_.inserts) * config_.samples_per_insert -
             static_cast<double>(counters_.samples) - static_cast<double>(n) >=
         config_.min_diff;
}

bool RateLimiter::CanInsert(int64_t n) const {
  CheckCount(n);
  return AllowsInserts(n);
}

bool RateLimiter::CanSample(int64_t n) const {
  CheckCount(n);
  return AllowsSamples(n);
}

void RateLimiter::NotifyWaiters() noexcept {
  // Checking the predicate first keeps the common case (nobody blocked, or
  // still blocked) free of futex calls.
  if (insert_waits_.waiting > 0 && (cancelled_ || AllowsInserts(1))) insert_cv_.notify_all();
  if (sample_waits_.waiting > 0 && (cancelled_ || AllowsSamples(1))) sample_cv_.notify_all();
  if (armed_ != 0) {
    const uint32_t ready = ReadySides(armed_);
    if (ready != 0) {
      armed_ &= ~ready;
      wake_->Raise(ready);
    }
  }
}

uint32_t RateLimiter::ReadySides(uint32_t sides) const noexcept {
  uint32_t ready = 0;
  if ((sides & WakeSignal::kInserts) != 0 && (cancelled_ || AllowsInserts(1))) ready |= WakeSignal::kInserts;
  if ((sides & WakeSignal::kSamples) != 0 && (cancelled_ || AllowsSamples(1))) ready |= WakeSignal::kSamples;
  return ready;
}

void RateLimiter::WaitClock::Change(int64_t delta) noexcept {
  const auto now = std::chrono::steady_clock::now();
  if (waiting > 0) total += (now - changed) * waiting;
  changed = now;
  waiting += delta;
  if (delta > 0) blocked += delta;
}

double RateLimiter::WaitClock::Seconds() const noexcept {
  auto sum = total;
  if (waiting > 0) sum += (std::chrono::steady_clock::now() - changed) * waiting;
  return std::chrono::duration<double>(sum).count();
}

void RateLimiter::NoteExternalWait(uint32_t side, int waiting) noexcept {
  (side == WakeSignal::kInserts ? insert_waits_ : sample_waits_).Change(waiting);
}

bool RateLimiter::ArmWake(WakeSignal& signal, uint32_t side) noexcept {
  if (ReadySides(side) != 0) return false;
  wake_ = &signal;
  armed_ |= side;
  return true;
}

void RateLimiter::RecordInsert() noexcept {
  ++counters_.inserts;
  NotifyWaiters();
}

void RateLimiter::RecordSample() noexcept {
  ++counters_.samples;
  NotifyWaiters();
}

void RateLimiter::RecordSamples(int64_t n) noexcept {
  counters_.samples += n;
  NotifyWaiters();
}

void RateLimiter::RecordDelete() noexcept {
  ++counters_.deletes;
  NotifyWaiters();
}

void RateLimiter::ResetCounters() noexcept {
  counters_ = {};
  NotifyWaiters();
}

void RateLimiter::SetCounters(const RateLimiterCounters& counters) noexcept {
  counters_ = counters;
  NotifyWaiters();
}

void RateLimiter::Cancel() noexcept {
  cancelled_ = true;
  insert_cv_.notify_all();
  sample_cv_.notify_all();
  if (armed_ != 0) {
    wake_->Raise(armed_);
    armed_ = 0;
  }
}

template <typename Ready>
bool RateLimiter::Await(std::unique_lock<std::mutex>& lock, const Deadline& deadline,
                        std::condition_variable& cv, WaitClock& side, const char* what,
                        Ready ready) {
  if (cancelled_) throw CancelledError("the table is closed");
  if (ready()) return false;
  const bool insert = std::string_view(what) == "insert";
  if (deadline.has_passed()) throw DeadlineExceededError(WhyBlocked(insert));
  side.Change(+1);
  const auto done = [&] { return cancelled_ || ready(); };
  bool ok;
  if (deadline.is_infinite()) {
    cv.wait(lock, done);
    ok = true;
  } else {
    ok = cv.wait_until(lock, deadline.time_point(), done);
  }
  side.Change(-1);
  if (cancelled_) throw CancelledError("the table was closed while waiting to " + std::string(what));
  if (!ok) throw DeadlineExceededError(WhyBlocked(insert));
  return true;
}

bool RateLimiter::AwaitCanInsert(std::unique_lock<std::mutex>& lock, const Deadline& deadline) {
  return Await(lock, deadline, insert_cv_, insert_waits_, "insert",
               [this] { return AllowsInserts(1); });
}

bool RateLimiter::AwaitCanSample(std::unique_lock<std::mutex>& lock, const Deadline& deadline) {
  return Await(lock, deadline, sample_cv_, sample_waits_, "sample",
               [this] { return AllowsSamples(1); });
}

RateLimiterInfo RateLimiter::Info() const noexcept {
  return {config_,
          counters_,
          insert_waits_.waiting,
          sample_waits_.waiting,
          insert_waits_.blocked,
          sample_waits_.blocked,
          insert_waits_.Seconds(),
          sample_waits_.Seconds()};
}

}  // namespace resound

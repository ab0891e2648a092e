// Decides when a table may accept an insert or serve a sample, following
// Reverb's arithmetic exactly:
//
//   can_insert(n): inserts + n - deletes <= min_size_to_sample          (still filling)
//                  or (inserts + n) * samples_per_insert - samples <= max_diff
//   can_sample(n): inserts - deletes >= min_size_to_sample
//                  and inserts * samples_per_insert - samples - n >= min_diff
//
// `inserts` counts new items (not priority updates of existing keys),
// `samples` every sample served, `deletes` every removal for any reason.
//
// The limiter is guarded by its table's mutex: callers pass the table's held
// lock to the blocking calls, which wait on the limiter's own condition
// variables (one for inserters, one for samplers) so that a state change only
// wakes the side it can unblock. A wait never holds any other table's lock.
#ifndef RESOUND_RATE_LIMITER_H_
#define RESOUND_RATE_LIMITER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include "resound/deadline.h"
#include "resound/wake_signal.h"

namespace resound {

struct RateLimiterConfig {
  double samples_per_insert = 1.0;
  int64_t min_size_to_sample = 1;
  double min_diff = 0.0;
  double max_diff = 0.0;
  // How the user built it, e.g. "Queue(10)" or "SampleToInsertRatio(
  // samples_per_insert=4, min_size_to_sample=1000, error_buffer=400)": the
  // name messages use. Empty means "say it from the numbers" (Kind()).
  std::string kind;

  // Throws InvalidArgumentError naming the first bad argument.
  void Validate() const;
  std::string ToString() const;
  // `kind` when set; otherwise MinSize(n) or Queue(n) when the numbers are
  // exactly those constructions' (a restored or remote config has no kind),
  // else the general RateLimiter(...) form.
  std::string Kind() const;

  // Reverb's constructions, each validated the way Reverb validates it.
  static RateLimiterConfig MinSize(int64_t min_size_to_sample);
  // error_buffer as one number: the allowed range is centred on
  // samples_per_insert * min_size_to_sample.
  static RateLimiterConfig SampleToInsertRatio(double samples_per_insert, int64_t min_size_to_sample,
                                               double error_buffer);
  // error_buffer as an explicit (min_diff, max_diff) pair.
  static RateLimiterConfig SampleToInsertRatio(double samples_per_insert, int64_t min_size_to_sample,
                                               std::pair<double, double> error_buffer);
  static RateLimiterConfig Queue(int64_t size);
  static RateLimiterConfig Stack(int64_t size);
};

struct RateLimiterCounters {
  int64_t inserts = 0;
  int64_t samples = 0;
  int64_t deletes = 0;
};

// A snapshot for TableInfo.
struct RateLimiterInfo {
  RateLimiterConfig config;
  RateLimiterCounters counters;
  int64_t waiting_inserts = 0;  // calls blocked right now
  int64_t waiting_samples = 0;
  int64_t blocked_inserts = 0;  // calls that ever had to wait, since creation
  int64_t blocked_samples = 0;
  // Seconds calls spent blocked, since creation, summed over the calls
  // (two calls blocked for one second count two), the waits still going
  // on included up to the moment of the snapshot.
  double blocked_insert_seconds = 0.0;
  double blocked_sample_seconds = 0.0;
};

class RateLimiter {
 public:
  // Validates `config`; `table_name` names the table in timeout messages.
  explicit RateLimiter(RateLimiterConfig config, std::string table_name = "");
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  const RateLimiterConfig& config() const noexcept { return config_; }
  const RateLimiterCounters& counters() const noexcept { return counters_; }

  // Pure predicates; n must be >= 1 (InvalidArgumentError naming `n`).
  bool CanInsert(int64_t n) const;
  bool CanSample(int64_t n) const;

  // Counter updates. Each wakes the waiters that the change may unblock.
  void RecordInsert() noexcept;
  void RecordSample() noexcept;
  void RecordSamples(int64_t n) noexcept;
  void RecordDelete() noexcept;
  // Zeroes the counters (table reset) and wakes every waiter to re-check.
  void ResetCounters() noexcept;
  // Restores counters saved earlier (checkpoint restore).
  void SetCounters(const RateLimiterCounters& counters) noexcept;

  // Blocks (releasing `lock`, which must hold the table mutex) until one
  // insert is allowed. Returns true if it had to wait. Throws
  // DeadlineExceededError when `deadline` passes first and CancelledError
  // once Cancel() has been called.
  bool AwaitCanInsert(std::unique_lock<std::mutex>& lock, const Deadline& deadline);
  // The same for one sample.
  bool AwaitCanSample(std::unique_lock<std::mutex>& lock, const Deadline& deadline);

  // Fails every current and future wait with CancelledError (and raises
  // every armed wake).
  void Cancel() noexcept;

  // For waiters outside the limiter (an event loop, see wake_signal.h):
  // raises `side` (WakeSignal::kInserts or kSamples) on `signal` once one
  // insert (or sample) is allowed or the limiter is cancelled, then disarms
  // it. Returns false, arming nothing, when that is already the case. One
  // signal per limiter; needs the table lock like the counter updates.
  bool ArmWake(WakeSignal& signal, uint32_t side) noexcept;
  // Counts a call that waits outside the limiter (`waiting` +1 when it
  // starts waiting, which also counts it as blocked, -1 when it stops) in
  // the figures of Info(), its blocked seconds too, as the limiter's own
  // waits are. Table lock held.
  void NoteExternalWait(uint32_t side, int waiting) noexcept;
  bool cancelled() const noexcept { return cancelled_; }
  // Why one more insert (or sample) is not allowed now, in the user's terms,
  // naming the limiter as it was built and how many calls of the other side
  // it needs: "table 't' has 0 items; MinSize(1) needs 1 before sampling" or
  // "table 'replay': SampleToInsertRatio(...) needs 412 more samples before
  // inserting (...)". Table lock held.
  std::string WhyBlocked(bool insert) const;

  RateLimiterInfo Info() const noexcept;

 private:
  // The predicates for n >= 1, unchecked.
  bool AllowsInserts(int64_t n) const noexcept;
  bool AllowsSamples(int64_t n) const noexcept;
  void NotifyWaiters() noexcept;
  // The armed sides that may proceed now (all of them once cancelled).
  uint32_t ReadySides(uint32_t sides) const noexcept;
  // The blocked time of one side: the integral over time of its count of
  // waiting calls. Every change of the count first adds the time since the
  // last change times the count before it, so neither the limiter's own
  // waits nor the external ones need a clock of their own.
  struct WaitClock {
    int64_t waiting = 0;
    int64_t blocked = 0;
    std::chrono::steady_clock::duration total{0};
    std::chrono::steady_clock::time_point changed{};

    void Change(int64_t delta) noexcept;
    double Seconds() const noexcept;  // total, plus the waits still going on
  };

  template <typename Ready>
  bool Await(std::unique_lock<std::mutex>& lock, const Deadline& deadline, std::condition_variable& cv,
             WaitClock& side, const char* what, Ready ready);

  const RateLimiterConfig config_;
  const std::string table_name_;
  RateLimiterCounters counters_;
  bool cancelled_ = false;
  std::condition_variable insert_cv_;
  std::condition_variable sample_cv_;
  WaitClock insert_waits_;
  WaitClock sample_waits_;
  WakeSignal* wake_ = nullptr;
  uint32_t armed_ = 0;  // WakeSignal bits
};

}  // namespace resound

#endif  // RESOUND_RATE_LIMITER_H_

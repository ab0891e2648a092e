// RateLimiter::WhyBlocked: the reason a call waits, in the user's terms,
// names the limiter as it was built and how many calls of the other side
// would let the next one through (and that count is right: doing what the
// message says unblocks the call).
#include "resound/rate_limiter.h"

#include <string>

#include "check.h"

namespace resound {
namespace {

void TestMinSizeBeforeSampling() {
  RateLimiter limiter(RateLimiterConfig::MinSize(1), "t");
  RESOUND_CHECK(limiter.WhyBlocked(false) == "table 't' has 0 items; MinSize(1) needs 1 before sampling");
  RateLimiter three(RateLimiterConfig::MinSize(3), "t");
  three.RecordInsert();
  RESOUND_CHECK(three.WhyBlocked(false) ==
                "table 't' has 1 item; MinSize(3) needs 3 before sampling (2 more inserts)");
  three.RecordInsert();
  three.RecordInsert();
  RESOUND_CHECK(three.CanSample(1));
}

void TestRatioNeedsSamplesBeforeInserting() {
  // error_buffer 10 around 4 * 1: inserts stop once inserts * 4 - samples > 14.
  RateLimiter limiter(RateLimiterConfig::SampleToInsertRatio(4.0, 1, 10.0), "replay");
  while (limiter.CanInsert(1)) limiter.RecordInsert();
  const std::string why = limiter.WhyBlocked(true);
  RESOUND_CHECK(why ==
                "table 'replay': SampleToInsertRatio(samples_per_insert=4, min_size_to_sample=1, "
                "error_buffer=10) needs 2 more samples before inserting (3 items, 3 inserts and "
                "0 samples so far)");
  limiter.RecordSample();
  RESOUND_CHECK(!limiter.CanInsert(1));
  limiter.RecordSample();
  RESOUND_CHECK(limiter.CanInsert(1));
}

void TestRatioNeedsInsertsBeforeSampling() {
  RateLimiter limiter(RateLimiterConfig::SampleToInsertRatio(2.0, 1, std::pair<double, double>{-1.0, 3.0}), "r");
  limiter.RecordInsert();
  limiter.RecordSamples(3);
  RESOUND_CHECK(limiter.WhyBlocked(false) ==
                "table 'r': SampleToInsertRatio(samples_per_insert=2, min_size_to_sample=1, "
                "error_buffer=(-1, 3)) needs 1 more insert before sampling (1 item, 1 insert and "
                "3 samples so far)");
  limiter.RecordInsert();
  RESOUND_CHECK(limiter.CanSample(1));
}

void TestQueueAndStackAreNamed() {
  RateLimiter queue(RateLimiterConfig::Queue(2), "q");
  queue.RecordInsert();
  queue.RecordInsert();
  RESOUND_CHECK(queue.WhyBlocked(true) ==
                "table 'q': Queue(2) needs 1 more sample before inserting (2 items, 2 inserts and "
                "0 samples so far)");
  RateLimiter stack(RateLimiterConfig::Stack(1), "s");
  stack.RecordInsert();
  RESOUND_CHECK(stack.WhyBlocked(true).rfind("table 's': Stack(1) needs 1 more sample", 0) == 0);
}

void TestKindFromNumbersWhenNotGiven() {
  // A config read back from a checkpoint or the wire carries no kind.
  RateLimiterConfig min_size = RateLimiterConfig::MinSize(5);
  min_size.kind.clear();
  RESOUND_CHECK(min_size.Kind() == "MinSize(5)");
  RateLimiterConfig queue = RateLimiterConfig::Queue(7);
  queue.kind.clear();
  RESOUND_CHECK(queue.Kind() == "Queue(7)");
  const RateLimiterConfig general{1.5, 2, -3.0, 3.5, ""};
  RESOUND_CHECK(general.Kind() == general.ToString());
  const RateLimiterConfig labelled{1.0, 1, 0.0, 4.0, "Stack(4)"};
  RESOUND_CHECK(labelled.Kind() == "Stack(4)");
}

}  // namespace
}  // namespace resound

int main() {
  resound::TestMinSizeBeforeSampling();
  resound::TestRatioNeedsSamplesBeforeInserting();
  resound::TestRatioNeedsInsertsBeforeSampling();
  resound::TestQueueAndStackAreNamed();
  resound::TestKindFromNumbersWhenNotGiven();
  return 0;
}

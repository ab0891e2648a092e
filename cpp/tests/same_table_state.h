// CheckSameState(a, b, same_insertion_times): the two tables hold the same
// items in the same insertion order (key, priority, times sampled, trajectory,
// chunk contents and, unless told otherwise, insertion time) and the same
// counters and statistics. Returns both snapshots, for checks of the caller's
// own. For the tests of checkpoints and restores.
#ifndef RESOUND_TESTS_SAME_TABLE_STATE_H_
#define RESOUND_TESTS_SAME_TABLE_STATE_H_

#include <algorithm>
#include <utility>
#include <vector>

#include "check.h"
#include "resound/table.h"

namespace resound::test_tables {

inline std::pair<std::vector<ItemSnapshot>, std::vector<ItemSnapshot>> CheckSameState(
    const Table& a, const Table& b, bool same_insertion_times) {
  const TableInfo x = a.Info();
  const TableInfo y = b.Info();
  RESOUND_CHECK(x.current_size == y.current_size && x.num_chunks == y.num_chunks);
  RESOUND_CHECK(x.num_episodes == y.num_episodes && x.num_unique_samples == y.num_unique_samples);
  RESOUND_CHECK(x.num_deleted_episodes == y.num_deleted_episodes);
  RESOUND_CHECK(x.rate_limiter.counters.inserts == y.rate_limiter.counters.inserts);
  RESOUND_CHECK(x.rate_limiter.counters.samples == y.rate_limiter.counters.samples);
  RESOUND_CHECK(x.rate_limiter.counters.deletes == y.rate_limiter.counters.deletes);
  auto p = a.Snapshot();
  auto q = b.Snapshot();
  RESOUND_CHECK(p.size() == q.size());
  for (size_t i = 0; i < p.size(); ++i) {
    RESOUND_CHECK(p[i].item->key() == q[i].item->key());
    RESOUND_CHECK(p[i].priority == q[i].priority && p[i].times_sampled == q[i].times_sampled);
    if (same_insertion_times) RESOUND_CHECK(p[i].inserted_at_ns == q[i].inserted_at_ns);
    const auto s = p[i].item->trajectory();
    const auto t = q[i].item->trajectory();
    RESOUND_CHECK(s.size() == t.size());
    for (size_t c = 0; c < s.size(); ++c) {
      RESOUND_CHECK(s[c].squeeze == t[c].squeeze);
      RESOUND_CHECK(std::equal(s[c].slices.begin(), s[c].slices.end(), t[c].slices.begin(), t[c].slices.end()));
    }
    RESOUND_CHECK(p[i].item->chunks().size() == q[i].item->chunks().size());
    for (size_t k = 0; k < p[i].item->chunks().size(); ++k) {
      RESOUND_CHECK(p[i].item->chunks()[k]->SameContentAs(*q[i].item->chunks()[k]));
    }
  }
  return {std::move(p), std::move(q)};
}

}  // namespace resound::test_tables

#endif  // RESOUND_TESTS_SAME_TABLE_STATE_H_

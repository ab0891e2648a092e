// Plain values that go in and out of a Table: its configuration, insert
// requests, sampled items, snapshots and info.
#ifndef RESOUND_TABLE_TYPES_H_
#define RESOUND_TABLE_TYPES_H_

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "resound/column_spec.h"
#include "resound/item.h"
#include "resound/rate_limiter.h"
#include "resound/selectors/selector_options.h"
#include "resound/trajectory.h"

namespace resound {

struct TableConfig {
  std::string name;
  SelectorOptions sampler;
  SelectorOptions remover;
  int64_t max_size = 1;
  // Items are deleted once sampled this many times; < 1 means never.
  int32_t max_times_sampled = 0;
  RateLimiterConfig rate_limiter;
  // Opaque to the core: the Python layer stores the encoded table signature.
  std::string signature;
  // The signature flattened to one spec per column; every inserted item is
  // checked against it. Empty: no check.
  std::vector<ColumnSpec> column_specs;
  // While the chunks the items hold take more bytes than this, the remover
  // evicts items (as it does past max_size); an item larger on its own is
  // refused. 0: no limit.
  int64_t max_bytes = 0;

  // Throws InvalidArgumentError naming the first bad field.
  void Validate() const;
};

struct ItemRequest {
  uint64_t key = 0;
  double priority = 0.0;
  Trajectory trajectory;
};

// One sample: the item (which keeps its chunks alive even if the table
// deletes it meanwhile) and its state at the moment it was chosen.
struct SampledItem {
  std::shared_ptr<const Item> item;
  double priority = 0.0;
  int32_t times_sampled = 0;  // including this sample
  double probability = 0.0;
  int64_t table_size = 0;     // before any deletion this sample caused
  int64_t inserted_at_ns = 0; // system clock, nanoseconds since the Unix epoch
  bool rate_limited = false;  // the call had to wait for the rate limiter
};

// An item as stored, for checkpoints and inspection.
struct ItemSnapshot {
  std::shared_ptr<const Item> item;
  double priority = 0.0;
  int32_t times_sampled = 0;
  int64_t inserted_at_ns = 0;
};

// What a checkpoint keeps of a table: references to its items (which keep
// their chunks alive) with their state, and the table's counters.
struct TableState {
  struct Entry {
    std::shared_ptr<const Item> item;
    double priority = 0.0;
    int32_t times_sampled = 0;
    int64_t inserted_at_ns = 0;
    // The selectors' order among items of equal priority (SlotSelector::TieOrder).
    uint64_t sampler_tie_order = 0;
    uint64_t remover_tie_order = 0;
  };
  std::vector<Entry> entries;  // in insertion order
  RateLimiterCounters counters;
  int64_t num_deleted_episodes = 0;
  int64_t num_unique_samples = 0;
};

// Outcome of a batch insert: how many requests were applied, in order, and
// the error that stopped the rest (null when all were applied).
struct InsertBatchResult {
  size_t num_applied = 0;
  std::exception_ptr error;
};

struct MutateResult {
  int64_t num_updated = 0;  // keys that were present and got a new priority
  int64_t num_deleted = 0;  // keys that were present and were removed
};

// How the priorities of a table's items spread: `counts[i]` items have a
// priority in bin i of counts.size() equal bins spanning [min, max] (the
// last bin includes max). All-equal priorities make one bin holding every
// item; an empty table has no bins (and min = max = 0).
struct PriorityHistogram {
  double min = 0.0;
  double max = 0.0;
  std::vector<int64_t> counts;
};

// Where a table's time went since it was created, in Reverb's terms (its
// TableWorkerTime), in milliseconds. resound tables have no worker thread:
// inserting and sampling are the time calls spent doing so under the
// table's lock (waits for the rate limiter excluded), the two waits the
// calls' blocked time (summed over calls, as the limiter's blocked
// seconds), and sleeping what running leaves of inserting and sampling.
struct TableWorkerTime {
  int64_t running_ms = 0;
  int64_t sampling_ms = 0;
  int64_t inserting_ms = 0;
  int64_t sleeping_ms = 0;
  int64_t waiting_for_sampling_ms = 0;  // inserts held up by the rate limiter
  int64_t waiting_for_inserts_ms = 0;   // samples held up by the rate limiter
};

struct TableInfo {
  std::string name;
  SelectorOptions sampler;
  SelectorOptions remover;
  int64_t max_size = 0;
  int32_t max_times_sampled = 0;
  int64_t max_bytes = 0;  // 0: no limit
  std::string signature;
  int64_t current_size = 0;
  int64_t num_episodes = 0;
  int64_t num_deleted_episodes = 0;
  int64_t num_unique_samples = 0;
  int64_t num_chunks = 0;      // distinct chunks referenced by the items
  int64_t memory_bytes = 0;    // memory of those chunks
  // Keys MutatePriorities found and gave a new priority, and found and
  // deleted, since the table was created (not reset, not checkpointed).
  int64_t num_priority_updates = 0;
  int64_t num_mutate_deletes = 0;
  RateLimiterInfo rate_limiter;
  TableWorkerTime worker_time;
  bool closed = false;
  // Changes to what a checkpoint of the table holds since it was created:
  // each insert, deletion, sample (times_sampled), priority update, reset
  // and restore adds at least 1. Equal counts: an equal checkpoint.
  uint64_t num_changes = 0;
};

}  // namespace resound

#endif  // RESOUND_TABLE_TYPES_H_

// A table: a bounded set of prioritized items, a sampler and a remover
// selector, and a rate limiter.
//
// Concurrency. One mutex guards the selection state (item index, both
// selectors, limiter counters, episode and chunk reference counts). Everything
// else happens outside it: items are resolved, validated and allocated before
// the lock is taken; chunk registration goes through the sharded ChunkStore;
// items that leave the table (evicted, sampled out, deleted, reset) are
// released after the lock is dropped, so payload memory is never freed inside
// the critical section. Blocking waits release the mutex (see RateLimiter).
//
// Layout. Entries sit densely in slots 0..size-1 (a delete moves the last
// entry into the hole) and one map finds an item's slot by key. Both
// selectors address items by slot (see SlotSelector), so they need no maps
// of their own and a sample reaches its entry without any lookup.
#ifndef RESOUND_TABLE_H_
#define RESOUND_TABLE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "resound/chunk_store.h"
#include "resound/deadline.h"
#include "resound/item.h"
#include "resound/key_map.h"
#include "resound/page_allocator.h"
#include "resound/rate_limiter.h"
#include "resound/selectors/slot_selector.h"
#include "resound/table_types.h"
#include "resound/wake_signal.h"

namespace resound {

class Table {
 public:
  // Upper bound on the samples one Sample() call returns.
  static constexpr int64_t kMaxSamplesPerCall = int64_t{1} << 16;
  // Upper bound on PriorityHistogram's bins: more is no longer a picture
  // and only costs memory and bytes on the wire.
  static constexpr int32_t kMaxHistogramBins = 1000;

  // Validates `config` (InvalidArgumentError). Items resolve their chunk keys
  // through `store`, which several tables may share.
  Table(TableConfig config, std::shared_ptr<ChunkStore> store);
  ~Table();
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  const std::string& name() const noexcept { return config_.name; }
  const TableConfig& config() const noexcept { return config_; }
  const std::shared_ptr<ChunkStore>& chunk_store() const noexcept { return store_; }

  // Inserts a new item, or, when the key is present, sets that item's priority
  // (and nothing else). Waits until the rate limiter allows an insert (also for
  // an existing key). After a new item goes in, the remover evicts one item if
  // the table is over max_size; that may be the new item itself.
  // Throws InvalidArgumentError / NotFoundError for a bad request (nothing
  // changes), DeadlineExceededError, CancelledError.
  void Insert(ItemRequest request, const Deadline& deadline);

  // Validates every request first (any bad request rejects the whole batch
  // with nothing inserted), then applies them in order under one lock. Stops
  // at the first deadline or close; the result says how many went in.
  InsertBatchResult InsertBatch(std::vector<ItemRequest> requests, const Deadline& deadline);

  // InsertBatch in two steps, so a caller can first try without waiting and
  // wait only for what is left (the bindings keep the GIL for the first try:
  // handing it over for a call of a few microseconds costs more than the call
  // when several Python threads write). Prepare validates every request and
  // builds the items without taking the table lock; InsertPrepared inserts
  // prepared[begin..] in order, moving out each item it applies, and counts
  // num_applied from `begin`.
  struct PreparedInsert {
    std::shared_ptr<const Item> item;
    double priority = 0.0;
  };
  std::vector<PreparedInsert> Prepare(std::vector<ItemRequest> requests) const;
  // Prepare of one request, read in place: a caller that builds requests in
  // a buffer of its own reuses it (no allocation per request).
  PreparedInsert PrepareOne(ItemRequest& request) const;
  InsertBatchResult InsertPrepared(std::vector<PreparedInsert>& prepared, size_t begin, const Deadline& deadline);

  // Waits (up to `deadline`) until the rate limiter allows one sample, then
  // takes up to `max_samples` (at most kMaxSamplesPerCall) in the same locked
  // pass while the limiter keeps allowing them. Throws DeadlineExceededError
  // if none could be taken, CancelledError if the table is closed,
  // InvalidArgumentError if max_samples < 1.
  std::vector<SampledItem> Sample(int64_t max_samples, const Deadline& deadline);

  // Validates every priority, then applies all updates and deletes at once
  // under the lock: a bad priority rejects the whole call and changes
  // nothing. Missing keys are ignored. A key both updated and deleted ends
  // up deleted.
  MutateResult MutatePriorities(const std::vector<std::pair<uint64_t, double>>& updates,
                                const std::vector<uint64_t>& deletes);

  // Removes every item and zeroes the limiter counters and statistics.
  // Callers blocked in Insert or Sample keep waiting and are re-evaluated
  // against the empty table, exactly as if they had arrived after the reset.
  void Reset();

  // Wakes every blocked caller with CancelledError; later inserts and samples
  // fail the same way. Stored items stay readable (Info, Snapshot). Idempotent.
  void Close() noexcept;
  bool closed() const;

  bool CanInsert(int64_t n) const;
  bool CanSample(int64_t n) const;

  // For event-driven servers, which wait without a thread (see
  // wake_signal.h). ArmWake(side) arranges for the wake descriptor to turn
  // readable, with `side` (WakeSignal::kInserts or kSamples) raised, once
  // that side may proceed or the table closes; it returns false and arms
  // nothing when that is already the case, so a caller that armed after a
  // failed try cannot miss the change between the two. The descriptor and
  // its signal are made on first use and live as long as the table.
  bool ArmWake(uint32_t side);
  int wake_fd();
  // The sides raised since the last call (see WakeSignal::Take).
  uint32_t TakeWakes();
  // Counts a call waiting outside the table (see RateLimiter::NoteExternalWait)
  // in Info()'s waiting and blocked figures: +1 as it starts, -1 as it ends.
  void NoteExternalWait(uint32_t side, int waiting);
  // Why one more insert (or sample) must wait now (RateLimiter::WhyBlocked);
  // what waiters outside the table log and put in their timeout messages.
  std::string WhyBlocked(bool insert) const;

  int64_t size() const;
  TableInfo Info() const;
  // The items' priorities in `bins` equal bins between the lowest and the
  // highest (see PriorityHistogram). InvalidArgumentError unless
  // 1 <= bins <= kMaxHistogramBins.
  PriorityHistogram HistogramOfPriorities(int32_t bins) const;
  // References to every item in insertion order, taken under the lock; the
  // copying of the list happens after it is released.
  std::vector<ItemSnapshot> Snapshot() const;

  // For checkpoints. Checkpoint() takes references to every item and the
  // counters under the lock (no copy of any data: inserts and samples wait
  // only for that), and sorts them after releasing it.
  TableState Checkpoint() const;
  // Fills this empty table with `state`: its items in their order, with
  // their priorities, times sampled and insertion times, the selectors'
  // orders among equal priorities, the limiter counters and statistics. The
  // items must already be built against this table's chunk store. Sampling
  // with Fifo, Lifo and heap selectors then goes on exactly as it would have
  // in the checkpointed table. FailedPreconditionError if the table holds
  // items; InvalidArgumentError (and nothing restored) for more items than
  // max_size, a priority the selectors refuse, a duplicate key, a column
  // the signature refuses or a negative times_sampled.
  void Restore(TableState state);

 private:
  struct Entry {
    // The key is read from the item (not kept here too: 8 bytes per item).
    // Moving the last entry into a freed slot reads it from the item most
    // recently inserted or moved, which is usually still in cache.
    std::shared_ptr<const Item> item;
    double priority = 0.0;
    int64_t inserted_at_ns = 0;
    uint64_t sequence = 0;  // insertion order
    int32_t times_sampled = 0;
  };
  using Released = std::vector<std::shared_ptr<const Item>>;

  void ValidatePriority(double priority) const;
  std::shared_ptr<const Item> Build(ItemRequest& request) const;
  // The following require mu_ to be held.
  void InsertLocked(std::shared_ptr<const Item> item, double priority, Released& released);
  void DeleteLocked(size_t slot, Released& released);
  void UpdateLocked(size_t slot, double priority);
  void CountSample(Entry& entry) noexcept;
  void AddReferences(const Item& item);
  void RemoveReferences(const Item& item);

  const TableConfig config_;
  const std::shared_ptr<ChunkStore> store_;

  mutable std::mutex mu_;
  PageVector<Entry> entries_;  // slot -> entry
  KeyMap<uint32_t, KeyMapMaxIsEmpty> slots_;  // item key -> slot (slots stay below kMaxSlots)
  std::unique_ptr<SlotSelector> sampler_;
  std::unique_ptr<SlotSelector> remover_;
  RateLimiter limiter_;
  // Counts drop to zero only as their key is erased, so zero marks a free
  // slot (16-byte slots instead of 24, and 12 for the 4-byte counts).
  KeyMap<uint64_t, KeyMapZeroIsEmpty> episode_refs_;  // episode id -> its chunks referenced here
  // Chunk key -> items referencing it. An item lists a chunk once, so a count
  // never exceeds the items in the table, which stay below kMaxSlots.
  KeyMap<uint32_t, KeyMapZeroIsEmpty> chunk_refs_;
  int64_t chunk_memory_bytes_ = 0;
  int64_t num_deleted_episodes_ = 0;
  int64_t num_unique_samples_ = 0;
  int64_t num_priority_updates_ = 0;  // by MutatePriorities, see TableInfo
  int64_t num_mutate_deletes_ = 0;
  uint64_t next_sequence_ = 0;
  uint64_t num_changes_ = 0;  // see TableInfo::num_changes
  // TableInfo::worker_time: when the table was made, and the time calls
  // spent inserting and sampling under the lock.
  const std::chrono::steady_clock::time_point created_at_ = std::chrono::steady_clock::now();
  std::chrono::nanoseconds inserting_{0};
  std::chrono::nanoseconds sampling_{0};
  bool closed_ = false;
  std::unique_ptr<WakeSignal> wake_;  // made by the first ArmWake or wake_fd
};

}  // namespace resound

#endif  // RESOUND_TABLE_H_

// Writes steps of N parallel environments (a vectorized environment) with
// one call per step for all of them, and creates their items in one call.
//
// Each environment gets exactly what a trajectory writer of its own would
// build: chunks of its own episode (so episode counts, checkpoints and
// sampling see ordinary chunks and items) and items that slice its newest
// steps. What a call does for all N environments in C++ (row copies, chunk
// bookkeeping, item building, the inserts) would cost N Python-level writer
// calls, each several microseconds; here the whole step costs about one.
//
// Items wait here until the chunks of their rows are complete (a chunk
// completes at max_chunk_length rows, at an episode's end, or by Flush),
// then are prepared (which makes them own their chunks) and inserted in the
// order they became ready. The writing calls (Append, CreateItems,
// EndEpisodes) end by inserting the ready items that their tables take
// without waiting, and return how many items are left queued, so that a
// caller throttling on that needs no other call; InsertReady waits for a
// rate limiter, never longer than its deadline. What a limiter held back
// stays queued, in order.
//
// Not meant for several threads at once, but safe if so: one mutex guards
// everything (held while waiting for a rate limiter too).
#ifndef RESOUND_VECTOR_WRITER_H_
#define RESOUND_VECTOR_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "resound/chunk_store.h"
#include "resound/column_chunker.h"
#include "resound/deadline.h"
#include "resound/dtype.h"
#include "resound/table.h"
#include "resound/table_types.h"

namespace resound {

class VectorWriter {
 public:
  struct ColumnFormat {
    DType dtype;
    std::vector<int64_t> step_shape;
  };

  // `num_envs` environments writing `columns`; items may span up to
  // `max_sequence_length` steps; chunks hold up to `max_chunk_length` steps
  // of one environment's column. All three must be >= 1
  // (InvalidArgumentError).
  VectorWriter(std::shared_ptr<ChunkStore> store, int64_t num_envs, std::vector<ColumnFormat> columns,
               int64_t max_sequence_length, int64_t max_chunk_length);
  VectorWriter(const VectorWriter&) = delete;
  VectorWriter& operator=(const VectorWriter&) = delete;

  // What a writing call did. Each one ends by inserting, without waiting,
  // the ready items that their tables take (as InsertReady with a deadline
  // already passed); an error inserting is thrown by that call, as
  // InsertReady throws it.
  struct Written {
    int64_t created = 0;  // items CreateItems queued (0 for the other calls)
    int64_t queued = 0;   // num_queued() after the call's inserts
  };

  // One step for every environment: columns[c] holds num_envs rows of column
  // c back to back (InvalidArgumentError naming the column otherwise, with
  // nothing appended).
  Written Append(std::span<const std::span<const std::byte>> columns);

  // Queues, for each environment selected by `envs` (one flag per
  // environment; empty: all) that has at least `length` steps in its
  // episode, an item of its newest `length` steps of every column, for
  // `table`. `priorities` holds one priority per environment or one for
  // all; each must be finite. `created` is the number of items queued.
  Written CreateItems(const std::shared_ptr<Table>& table, int64_t length, std::span<const double> priorities,
                      std::span<const uint8_t> envs);

  // Ends the episodes of the selected environments (empty: all): their
  // open chunks complete (so their queued items become ready) and their
  // next steps begin new episodes.
  Written EndEpisodes(std::span<const uint8_t> envs);

  // Completes every open chunk: every queued item becomes ready.
  void CompleteChunks();

  // Inserts ready items in order, waiting for rate limiters up to
  // `deadline`; returns how many went in. Items a limiter held back stay
  // queued. Errors other than the deadline (a closed table, a signature
  // mismatch) are thrown; the failing item is dropped so that the rest can
  // still go in, and nothing else is lost.
  int64_t InsertReady(const Deadline& deadline);

  int64_t num_envs() const noexcept { return num_envs_; }
  size_t num_columns() const noexcept { return formats_.size(); }
  const std::vector<ColumnFormat>& formats() const noexcept { return formats_; }
  // Items created and not yet inserted (waiting for chunks or for a table).
  int64_t num_queued() const;
  // Of those, the ones whose chunks are complete.
  int64_t num_ready() const;
  // Steps in each environment's current episode.
  std::vector<int64_t> episode_steps() const;

 private:
  // An item waiting for its chunks: its rows are still in the ring, so the
  // trajectory is built only when it is prepared (into request_, reused).
  struct PendingItem {
    std::shared_ptr<Table> table;
    uint64_t key;
    double priority;
    int64_t length;
    int64_t last_step;  // the episode step of the item's newest row
  };
  struct ReadyItem {
    std::shared_ptr<Table> table;
    Table::PreparedInsert prepared;
  };
  struct Env {
    std::vector<std::unique_ptr<ColumnChunker>> chunkers;  // one per column
    uint64_t episode_id = 0;
    int64_t steps = 0;  // steps in the current episode
    // The newest ring_size_ rows, as a ring indexed by step: the chunk key
    // of each column's row and the row's offset in its chunk (the same for
    // every column, which all chunk in step). It covers every pending item:
    // an item is prepared at most max_chunk_length - 1 steps after it was
    // created, when the chunk of its newest row completes.
    std::vector<uint64_t> ring_keys;  // [ring slot][column]
    std::vector<int64_t> ring_offsets;  // [ring slot]
    std::deque<PendingItem> pending;   // waiting for their chunks, oldest first
  };

  uint64_t NextKeyLocked() noexcept;
  void StartEpisodeLocked(Env& env) noexcept;
  // Moves env's pending items whose chunks are complete to ready_.
  // A batch the table refuses (throws) is dropped from the queue.
  void PrepareCompleteLocked(Env& env);
  // PrepareCompleteLocked for every environment; throws the first error
  // after trying them all.
  void PrepareAllCompleteLocked();
  // InsertReady with mu_ held.
  int64_t InsertReadyLocked(const Deadline& deadline);
  // The end of a writing call: inserts what the tables take at once.
  Written InsertWithoutWaitingLocked(int64_t created);
  int64_t NumQueuedLocked() const noexcept { return num_pending_ + static_cast<int64_t>(ready_.size()); }
  // Writes the trajectory of env's newest rows [last_step - length + 1,
  // last_step] into `trajectory`, reusing its buffers.
  void TrajectoryLocked(const Env& env, int64_t length, int64_t last_step, Trajectory& trajectory) const;

  const std::shared_ptr<ChunkStore> store_;
  const int64_t num_envs_;
  const std::vector<ColumnFormat> formats_;
  const int64_t max_sequence_length_;
  const int64_t max_chunk_length_;
  std::vector<size_t> row_bytes_;  // per column
  int64_t ring_size_ = 0;

  mutable std::mutex mu_;
  std::vector<Env> envs_;
  std::deque<ReadyItem> ready_;
  int64_t num_pending_ = 0;
  uint64_t key_state_ = 0;
  std::vector<Table::PreparedInsert> batch_;  // scratch for InsertReady
  ItemRequest request_;                       // scratch for PrepareCompleteLocked
};

}  // namespace resound

#endif  // RESOUND_VECTOR_WRITER_H_

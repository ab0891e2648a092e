// Builds the uncompressed chunks of one trajectory-writer column and keeps
// the complete ones alive while the writer may still reference their rows.
//
// The writer appends one row (cell) per step. Doing the row copy, the chunk
// bookkeeping and the hand-over to the store here, in one call per step,
// costs a fraction of doing it from Python; and handing each complete chunk
// back to Python as an object, only for the writer to hold it and drop it a
// few steps later, would cost more than the copy. So the chunker keeps the
// complete chunks itself, exactly as long as one of their rows is among the
// newest `keep_alive` rows (the writer's keep-alive window), and the writer
// deals in chunk keys. A writer that needs a chunk object for longer (an
// item waiting for the rate limiter) looks it up in the store by key while
// the chunker still keeps it.
//
// Compressed and string columns are chunked by the Python writer instead.
#ifndef RESOUND_COLUMN_CHUNKER_H_
#define RESOUND_COLUMN_CHUNKER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "resound/chunk.h"
#include "resound/chunk_store.h"

namespace resound {

class ColumnChunker {
 public:
  // Rows of `dtype` cells shaped `step_shape`, gathered into chunks of at
  // most `max_chunk_length` rows in `store`; `keep_alive` is the writer's
  // window in rows. Both must be >= 1 (InvalidArgumentError otherwise).
  ColumnChunker(std::shared_ptr<ChunkStore> store, DType dtype, std::vector<int64_t> step_shape,
                int64_t max_chunk_length, int64_t keep_alive);
  ColumnChunker(const ColumnChunker&) = delete;
  ColumnChunker& operator=(const ColumnChunker&) = delete;

  // Copies one row (exactly one cell of bytes, InvalidArgumentError
  // otherwise) into the open chunk, opening one for episode `episode_id` at
  // `step` if none is. A chunk that reaches `max_chunk_length` rows is
  // completed into the store at once. Returns the key of the row's chunk
  // (drawn at random when the chunk opens, so writers do not collide).
  uint64_t Append(std::span<const std::byte> row, uint64_t episode_id, int64_t step);

  // Completes the open chunk with the rows it has; nothing if none is open.
  void Finalize();

  // A copy of row `offset` of the open chunk (InvalidArgumentError if there
  // is no such row).
  std::vector<std::byte> OpenRow(int64_t offset) const;

  // Drops the open rows and every kept chunk, and counts rows from zero
  // again (a new episode that clears the writer's history).
  void Clear() noexcept;

  // Keeps chunks for the newest `keep_alive` rows from now on (>= 1).
  void SetKeepAlive(int64_t keep_alive);
  // Chunks of at most `max_chunk_length` rows from now on (>= 1); only
  // while no chunk is open (FailedPreconditionError otherwise).
  void SetMaxChunkLength(int64_t max_chunk_length);

  int64_t keep_alive() const noexcept;
  int64_t max_chunk_length() const noexcept;
  int64_t open_rows() const noexcept;
  // Complete chunks the chunker keeps alive.
  size_t num_kept() const noexcept;
  // Bytes of one row.
  size_t row_bytes() const noexcept { return row_bytes_; }

 private:
  struct Kept {
    int64_t last_row;  // index (in rows appended since Clear) of the chunk's last row
    std::shared_ptr<const Chunk> chunk;
  };

  uint64_t NextKeyLocked() noexcept;
  // Puts the open chunk, whose `open_rows_` rows are `rows`, into the store
  // and keeps it. Cannot fail validation (Append checks steps and sizes).
  void CompleteLocked(std::span<const std::byte> rows);
  // Moves chunks without a row in the keep-alive window into `dropped`, to
  // be destroyed after the lock is released (a chunk's destructor takes a
  // store lock).
  void TrimLocked(std::vector<std::shared_ptr<const Chunk>>& dropped);
  // The oldest kept chunk, taken out, if it has no row in the keep-alive
  // window (else nullptr). One appended row moves the window by one row, and
  // kept chunks end on different rows, so Append needs one call: a handle
  // rather than a vector, so that appending allocates nothing but chunks.
  std::shared_ptr<const Chunk> TrimOneLocked() noexcept;
  // Appends to kept_, first compacting the dropped entries at its front once
  // they are half of it (amortised O(1); its capacity is reused, so a
  // steady stream of chunks allocates nothing here, unlike a deque's blocks).
  void KeepLocked(Kept kept);

  const std::shared_ptr<ChunkStore> store_;
  size_t row_bytes_ = 0;
  // Guards everything below: a writer is meant for one thread, but misuse
  // from two must not corrupt the chunker (large copies run without the GIL).
  mutable std::mutex mu_;
  ChunkMetadata metadata_;      // the open chunk's description (key, episode, steps)
  std::vector<std::byte> rows_;  // room for max_chunk_length rows
  int64_t max_chunk_length_ = 1;
  int64_t keep_alive_ = 1;
  int64_t open_rows_ = 0;
  int64_t rows_appended_ = 0;  // since construction or Clear
  // Kept chunks, oldest first, from index kept_begin_ on (the entries
  // before it were dropped: see KeepLocked).
  std::vector<Kept> kept_;
  size_t kept_begin_ = 0;
  uint64_t key_state_ = 0;     // splitmix64 state, seeded from std::random_device
};

}  // namespace resound

#endif  // RESOUND_COLUMN_CHUNKER_H_

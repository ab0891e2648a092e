// Medium-size blocks (1 KB to 256 KB) freed on one thread and handed out
// again on any other.
//
// A replay table frees memory on whichever thread evicts: the chunk of a 4 KB
// step written by one actor thread is freed by another actor's insert.
// glibc gives each thread its own arena and its per-thread cache stops at
// 1 KB, so every such free went to another thread's arena under that arena's
// lock, and writers slowed down as threads were added (4 writer threads:
// 15-25 % below one). Blocks from here go to one shared free list per size
// class instead, and the next allocation of that size, on any thread, takes
// them back.
//
// At most kMaxCachedBytes of free blocks are kept; beyond that they go back
// to malloc. Thread-safe; all functions are static (one cache per process).
#ifndef RESOUND_BLOCK_RECYCLER_H_
#define RESOUND_BLOCK_RECYCLER_H_

#include <cstddef>

namespace resound {

class BlockRecycler {
 public:
  static constexpr size_t kMinBytes = 1024;
  static constexpr size_t kMaxBytes = 256 * 1024;
  // Size classes are multiples of this: malloc's own granularity, so a
  // recycled block costs no more than a malloc'd one (a replay table holds
  // millions of chunks; coarser classes cost ~200 B each at 4 KB).
  static constexpr size_t kGranularity = 16;
  static constexpr size_t kMaxCachedBytes = 64 << 20;

  BlockRecycler() = delete;

  // A block of at least `bytes` bytes, aligned for any type.
  static void* Allocate(size_t bytes);
  // Takes back a block from Allocate(bytes), with the same `bytes`.
  static void Deallocate(void* block, size_t bytes) noexcept;

  // Free blocks cached now, and their bytes (for tests).
  static size_t num_cached() noexcept;
  static size_t cached_bytes() noexcept;
};

}  // namespace resound

#endif  // RESOUND_BLOCK_RECYCLER_H_

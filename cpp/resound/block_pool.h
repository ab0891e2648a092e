// Large buffers kept for reuse after their owners let go.
//
// The first write to freshly allocated memory costs a page fault per 4 KB
// page (the kernel maps and zeroes each one), and malloc hands buffers of
// more than 32 MB straight back to the kernel when they are freed. A learner
// that samples 256 items of 400 KB gets a new 100 MB array per batch, so
// every batch paid for 25,000 page faults: more than the copy into the array
// itself. Buffers from this pool go back to it instead and are handed out
// again, already mapped, for the next request of about the same size.
//
// The pool keeps at most `max_cached_bytes` of unused buffers; beyond that a
// returned buffer is freed as usual. Buffers handed out are never shared:
// one owner (and its copies of the handle) at a time. Thread-safe.
//
// Every buffer, pooled or not, starts on a kAlignment-byte boundary: XLA's
// CPU client (jnp.asarray, jax.dlpack, jax.device_put) aliases host memory
// only when it is 64-byte aligned and copies it otherwise, and malloc gives
// 16.
#ifndef RESOUND_BLOCK_POOL_H_
#define RESOUND_BLOCK_POOL_H_

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace resound {

class BlockPool {
 public:
  // Where every buffer starts (bytes): a cache line, and what XLA needs.
  static constexpr size_t kAlignment = 64;
  // Requests below this many bytes are plain allocations: malloc recycles
  // small blocks itself, without page faults.
  static constexpr size_t kMinPooledBytes = 256 * 1024;
  // A cached buffer serves a request of at least this fraction of its size
  // (so a pool of 100 MB batches does not hand 100 MB out for 1 MB).
  static constexpr size_t kMaxWasteDivisor = 4;  // waste <= 1/4 of the buffer

  explicit BlockPool(size_t max_cached_bytes);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // The pool behind the arrays the bindings hand to Python (512 MB cached
  // at most).
  static BlockPool& Shared();

  // A buffer of at least `bytes` bytes (contents unspecified), aligned to
  // kAlignment bytes. It returns to
  // the pool when the last copy of the handle is destroyed, which may happen
  // on any thread and after the pool object itself is gone.
  std::shared_ptr<std::byte> Acquire(size_t bytes);

  size_t cached_bytes() const noexcept;
  size_t num_cached() const noexcept;
  size_t max_cached_bytes() const noexcept { return max_cached_bytes_; }

 private:
  struct State;
  // Frees what AllocateAligned allocated.
  struct AlignedDelete {
    void operator()(std::byte* data) const noexcept;
  };
  using AlignedBuffer = std::unique_ptr<std::byte[], AlignedDelete>;
  static AlignedBuffer AllocateAligned(size_t bytes);

  const size_t max_cached_bytes_;
  // Shared with the handles' deleters, so that buffers returned after the
  // pool is destroyed still find somewhere to go (and are freed there).
  std::shared_ptr<State> state_;
};

}  // namespace resound

#endif  // RESOUND_BLOCK_POOL_H_

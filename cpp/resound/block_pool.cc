#include "resound/block_pool.h"

#include <new>
#include <utility>

namespace resound {

struct BlockPool::State {
  explicit State(size_t limit) noexcept : max_cached_bytes(limit) {}

  // Takes `buffer` back: cached if it fits under the limit (evicting the
  // smallest cached buffers to make room), freed otherwise.
  void Return(AlignedBuffer buffer, size_t bytes) noexcept {
    AlignedBuffer dropped;  // freed after the lock, not under it
    std::multimap<size_t, AlignedBuffer> evicted;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (bytes > max_cached_bytes) {
        dropped = std::move(buffer);
      } else {
        while (cached_bytes + bytes > max_cached_bytes && !free.empty()) {
          auto smallest = free.begin();
          cached_bytes -= smallest->first;
          evicted.insert(free.extract(smallest));
        }
        try {
          free.emplace(bytes, std::move(buffer));
          cached_bytes += bytes;
        } catch (...) {  // no memory for the map's node: free the buffer instead
          dropped = std::move(buffer);
        }
      }
    }
  }

  // A cached buffer of at least `bytes` and at most bytes * 4/3 bytes, or
  // {nullptr, 0}.
  std::pair<AlignedBuffer, size_t> Take(size_t bytes) noexcept {
    std::lock_guard<std::mutex> lock(mu);
    auto found = free.lower_bound(bytes);
    if (found == free.end() || found->first - bytes > found->first / kMaxWasteDivisor) return {nullptr, 0};
    const size_t size = found->first;
    auto node = free.extract(found);
    cached_bytes -= size;
    return {std::move(node.mapped()), size};
  }

  const size_t max_cached_bytes;
  mutable std::mutex mu;
  std::multimap<size_t, AlignedBuffer> free;  // by size
  size_t cached_bytes = 0;
};

void BlockPool::AlignedDelete::operator()(std::byte* data) const noexcept {
  ::operator delete[](data, std::align_val_t{kAlignment});
}

BlockPool::AlignedBuffer BlockPool::AllocateAligned(size_t bytes) {
  // The aligned form of operator new (C++17); AlignedDelete is its pair.
  return AlignedBuffer(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{kAlignment})));
}

BlockPool::BlockPool(size_t max_cached_bytes)
    : max_cached_bytes_(max_cached_bytes), state_(std::make_shared<State>(max_cached_bytes)) {}

BlockPool& BlockPool::Shared() {
  // Arrays may outlive this object at exit: their handles keep the state.
  static BlockPool pool(512ULL << 20);
  return pool;
}

std::shared_ptr<std::byte> BlockPool::Acquire(size_t bytes) {
  if (bytes < kMinPooledBytes) {
    return std::shared_ptr<std::byte>(AllocateAligned(bytes == 0 ? 1 : bytes).release(), AlignedDelete());
  }
  auto [buffer, size] = state_->Take(bytes);
  if (!buffer) {
    // Rounded up to 64 KB, so that requests that differ by a few bytes
    // (say a batch of one more small column) can share buffers.
    size = (bytes + 0xFFFF) & ~size_t{0xFFFF};
    buffer = AllocateAligned(size);
  }
  // The deleter takes the buffer back (also if the control block cannot be
  // allocated: shared_ptr then calls it before throwing).
  return std::shared_ptr<std::byte>(buffer.release(), [state = state_, size](std::byte* data) noexcept {
    state->Return(AlignedBuffer(data), size);
  });
}

size_t BlockPool::cached_bytes() const noexcept {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->cached_bytes;
}

size_t BlockPool::num_cached() const noexcept {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->free.size();
}

}  // namespace resound

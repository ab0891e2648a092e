#include "resound/block_recycler.h"

#include <array>
#include <atomic>
#include <mutex>
#include <new>
#include <vector>

namespace resound {
namespace {

constexpr size_t kNumClasses = BlockRecycler::kMaxBytes / BlockRecycler::kGranularity + 1;

bool Recyclable(size_t bytes) noexcept {
  return bytes >= BlockRecycler::kMinBytes && bytes < BlockRecycler::kMaxBytes;
}

size_t ClassOf(size_t bytes) noexcept {
  return (bytes + BlockRecycler::kGranularity - 1) / BlockRecycler::kGranularity;
}

struct Cache {
  ~Cache() {
    // Blocks freed after this (by objects destroyed later at exit) go to
    // malloc directly.
    destroyed.store(true, std::memory_order_release);
    for (auto& blocks : free) {
      for (void* block : blocks) ::operator delete(block);
    }
  }

  std::mutex mu;
  std::array<std::vector<void*>, kNumClasses> free;
  size_t num_cached = 0;
  size_t cached_bytes = 0;
  // Constant-initialised and trivially destructible: readable at any time.
  static inline std::atomic<bool> destroyed{false};
};

Cache& TheCache() {
  static Cache cache;
  return cache;
}

}  // namespace

void* BlockRecycler::Allocate(size_t bytes) {
  if (!Recyclable(bytes)) return ::operator new(bytes);
  const size_t size_class = ClassOf(bytes);
  if (!Cache::destroyed.load(std::memory_order_acquire)) {
    Cache& cache = TheCache();
    std::lock_guard<std::mutex> lock(cache.mu);
    auto& blocks = cache.free[size_class];
    if (!blocks.empty()) {
      void* block = blocks.back();
      blocks.pop_back();
      --cache.num_cached;
      cache.cached_bytes -= size_class * kGranularity;
      return block;
    }
  }
  return ::operator new(size_class * kGranularity);
}

void BlockRecycler::Deallocate(void* block, size_t bytes) noexcept {
  if (Recyclable(bytes) && !Cache::destroyed.load(std::memory_order_acquire)) {
    const size_t size_class = ClassOf(bytes);
    Cache& cache = TheCache();
    std::lock_guard<std::mutex> lock(cache.mu);
    if (cache.cached_bytes + size_class * kGranularity <= kMaxCachedBytes) {
      try {
        cache.free[size_class].push_back(block);
        ++cache.num_cached;
        cache.cached_bytes += size_class * kGranularity;
        return;
      } catch (...) {
        // No memory to grow the list: free the block below.
      }
    }
  }
  ::operator delete(block);
}

size_t BlockRecycler::num_cached() noexcept {
  Cache& cache = TheCache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return cache.num_cached;
}

size_t BlockRecycler::cached_bytes() noexcept {
  Cache& cache = TheCache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return cache.cached_bytes;
}

}  // namespace resound

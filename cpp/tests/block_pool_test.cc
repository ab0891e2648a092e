// BlockPool: a returned buffer is handed out again for a request of about its
// size (and only then), the cache stays under its limit, live buffers are
// never handed out twice, and buffers may outlive the pool. The last case
// runs threads acquiring and releasing at once, for TSan.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "check.h"
#include "resound/block_pool.h"

namespace resound {
namespace {

constexpr size_t kMB = 1 << 20;

void ReusesAReturnedBufferForASimilarSize() {
  BlockPool pool(64 * kMB);
  std::byte* first = nullptr;
  {
    auto buffer = pool.Acquire(10 * kMB);
    first = buffer.get();
    std::memset(first, 1, 10 * kMB);  // writable over the whole request
  }
  RESOUND_CHECK(pool.num_cached() == 1);
  RESOUND_CHECK(pool.cached_bytes() == 10 * kMB);
  {
    auto again = pool.Acquire(9 * kMB);  // within a quarter of the buffer
    RESOUND_CHECK(again.get() == first);
    RESOUND_CHECK(pool.num_cached() == 0);
  }
  // Too small a request for the cached buffer: a new one instead.
  auto small = pool.Acquire(1 * kMB);
  RESOUND_CHECK(small.get() != first);
  RESOUND_CHECK(pool.num_cached() == 1);
  // Too large: the cached one cannot serve it.
  auto large = pool.Acquire(11 * kMB);
  RESOUND_CHECK(large.get() != first);
}

void NeverHandsOutALiveBuffer() {
  BlockPool pool(64 * kMB);
  std::vector<std::shared_ptr<std::byte>> live;
  std::set<std::byte*> seen;
  for (int i = 0; i < 8; ++i) {
    live.push_back(pool.Acquire(2 * kMB));
    RESOUND_CHECK(seen.insert(live.back().get()).second);
  }
  auto copy = live[3];
  live[3].reset();  // a copy of the handle still owns it
  RESOUND_CHECK(pool.num_cached() == 0);
  auto other = pool.Acquire(2 * kMB);
  RESOUND_CHECK(other.get() != copy.get());
}

void StaysUnderItsLimit() {
  BlockPool pool(10 * kMB);
  {
    auto a = pool.Acquire(4 * kMB);
    auto b = pool.Acquire(4 * kMB);
    auto c = pool.Acquire(4 * kMB);
    auto huge = pool.Acquire(20 * kMB);  // larger than the whole cache
  }
  RESOUND_CHECK(pool.cached_bytes() <= 10 * kMB);
  RESOUND_CHECK(pool.num_cached() == 2);
  // A buffer returned to a full cache evicts smaller ones to fit.
  { auto big = pool.Acquire(9 * kMB); }
  RESOUND_CHECK(pool.cached_bytes() == 9 * kMB);
  RESOUND_CHECK(pool.num_cached() == 1);
}

void SmallRequestsAreNotCached() {
  BlockPool pool(10 * kMB);
  { auto small = pool.Acquire(BlockPool::kMinPooledBytes - 1); }
  { auto empty = pool.Acquire(0); }
  RESOUND_CHECK(pool.num_cached() == 0);
}

void BuffersMayOutliveThePool() {
  std::shared_ptr<std::byte> survivor;
  {
    BlockPool pool(10 * kMB);
    survivor = pool.Acquire(1 * kMB);
  }
  std::memset(survivor.get(), 2, 1 * kMB);
  survivor.reset();  // returns to the pool's state, which then goes too
}

void ThreadsShareOnePool() {
  BlockPool pool(32 * kMB);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 2000; ++i) {
        const size_t bytes = (1 + static_cast<size_t>((i + t) % 3)) * kMB;
        auto buffer = pool.Acquire(bytes);
        // Nobody else may be using it: write a pattern and read it back.
        std::memset(buffer.get(), t + 1, 4096);
        for (size_t k = 0; k < 4096; ++k) RESOUND_CHECK(buffer.get()[k] == std::byte(t + 1));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  RESOUND_CHECK(pool.cached_bytes() <= 32 * kMB);
}

// Small (plain) and large (pooled, also when reused) buffers all start on a
// 64-byte boundary, so that XLA aliases batch arrays instead of copying them.
void EveryBufferIsAligned() {
  BlockPool pool(64 * kMB);
  const auto aligned = [](const std::shared_ptr<std::byte>& buffer) {
    return reinterpret_cast<std::uintptr_t>(buffer.get()) % BlockPool::kAlignment == 0;
  };
  for (const size_t bytes : {size_t{0}, size_t{1}, size_t{24}, size_t{4097}, BlockPool::kMinPooledBytes + 8,
                             3 * kMB + 16}) {
    RESOUND_CHECK(aligned(pool.Acquire(bytes)));  // each returned to the pool at once
    RESOUND_CHECK(aligned(pool.Acquire(bytes)));  // a reused one, for the pooled sizes
  }
}

}  // namespace
}  // namespace resound

int main() {
  resound::ReusesAReturnedBufferForASimilarSize();
  resound::NeverHandsOutALiveBuffer();
  resound::StaysUnderItsLimit();
  resound::SmallRequestsAreNotCached();
  resound::BuffersMayOutliveThePool();
  resound::ThreadsShareOnePool();
  resound::EveryBufferIsAligned();
  return 0;
}

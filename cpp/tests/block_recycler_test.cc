// BlockRecycler: a block freed on one thread is handed out again, on another
// thread, for a request of the same size class; sizes outside its range are
// plain allocations; the cache stays under its limit. The threads case runs
// under TSan in CI.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "check.h"
#include "resound/block_recycler.h"
#include "resound/trailing_allocator.h"

namespace resound {
namespace {

void ReusesABlockFreedOnAnotherThread() {
  void* block = BlockRecycler::Allocate(4096 + 100);
  std::memset(block, 7, 4096 + 100);
  std::thread([block] { BlockRecycler::Deallocate(block, 4096 + 100); }).join();
  const size_t cached = BlockRecycler::num_cached();
  RESOUND_CHECK(cached >= 1);
  void* again = BlockRecycler::Allocate(4096 + 97);  // same 16-byte class
  RESOUND_CHECK(again == block);
  RESOUND_CHECK(BlockRecycler::num_cached() == cached - 1);
  BlockRecycler::Deallocate(again, 4096 + 97);
}

void DoesNotKeepBlocksOutsideItsRange() {
  const size_t cached = BlockRecycler::num_cached();
  void* small = BlockRecycler::Allocate(BlockRecycler::kMinBytes - 1);
  void* large = BlockRecycler::Allocate(BlockRecycler::kMaxBytes);
  BlockRecycler::Deallocate(small, BlockRecycler::kMinBytes - 1);
  BlockRecycler::Deallocate(large, BlockRecycler::kMaxBytes);
  RESOUND_CHECK(BlockRecycler::num_cached() == cached);
}

void StaysUnderItsLimit() {
  // More than the limit in blocks of 128 KB, all freed at once.
  std::vector<void*> blocks;
  for (size_t i = 0; i < 2 * BlockRecycler::kMaxCachedBytes / (128 * 1024); ++i) {
    blocks.push_back(BlockRecycler::Allocate(128 * 1024));
  }
  for (void* block : blocks) BlockRecycler::Deallocate(block, 128 * 1024);
  RESOUND_CHECK(BlockRecycler::cached_bytes() <= BlockRecycler::kMaxCachedBytes);
  RESOUND_CHECK(BlockRecycler::cached_bytes() >= BlockRecycler::kMaxCachedBytes / 2);
}

void LiveBlocksAreNeverHandedOutTwice() {
  std::vector<void*> live;
  std::set<void*> seen;
  for (int i = 0; i < 100; ++i) {
    live.push_back(BlockRecycler::Allocate(2000));
    RESOUND_CHECK(seen.insert(live.back()).second);
  }
  for (void* block : live) BlockRecycler::Deallocate(block, 2000);
}

// Objects with trailing data on recycled blocks: the header keeps the size,
// and the trailing data keeps its alignment.
struct Payload {
  explicit Payload(const TrailingStorage& storage) noexcept : data(storage.data) {}
  std::byte* data;
};

void TrailingObjectsOnRecycledBlocks() {
  TrailingStorage storage{5000};
  auto object = AllocateSharedWithTrailing<Payload, RecycledBlocks>(storage);
  RESOUND_CHECK(reinterpret_cast<uintptr_t>(object->data) % kTrailingAlignment == 0);
  std::memset(object->data, 1, 5000);
  void* const address = object.get();
  object.reset();
  TrailingStorage again{5000};
  auto second = AllocateSharedWithTrailing<Payload, RecycledBlocks>(again);
  RESOUND_CHECK(static_cast<void*>(second.get()) == address);
}

void ThreadsAllocateAndFreeEachOthersBlocks() {
  // Each thread frees the blocks its neighbour made.
  constexpr int kThreads = 4;
  std::vector<std::vector<void*>> made(kThreads);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&made, t, round] {
        auto& theirs = made[(t + 1) % kThreads];
        for (void* block : theirs) BlockRecycler::Deallocate(block, 3000);
        theirs.clear();
        auto& mine = made[t];
        for (int i = 0; i < 100; ++i) {
          void* block = BlockRecycler::Allocate(3000);
          std::memset(block, t + round, 3000);
          mine.push_back(block);
        }
      });
      threads.back().join();  // neighbours' lists are not shared while running
    }
  }
  for (auto& blocks : made) {
    for (void* block : blocks) BlockRecycler::Deallocate(block, 3000);
  }
  // And truly concurrently, each thread on its own blocks.
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 20000; ++i) {
        auto* block = static_cast<unsigned char*>(BlockRecycler::Allocate(1024 + 16 * (i % 8)));
        block[0] = static_cast<unsigned char>(t);
        RESOUND_CHECK(block[0] == static_cast<unsigned char>(t));
        BlockRecycler::Deallocate(block, 1024 + 16 * (i % 8));
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

}  // namespace
}  // namespace resound

int main() {
  resound::ReusesABlockFreedOnAnotherThread();
  resound::DoesNotKeepBlocksOutsideItsRange();
  resound::LiveBlocksAreNeverHandedOutTwice();
  resound::TrailingObjectsOnRecycledBlocks();
  resound::ThreadsAllocateAndFreeEachOthersBlocks();
  resound::StaysUnderItsLimit();  // last: it leaves the cache full
  return 0;
}

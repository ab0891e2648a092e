// ChunkStore and the chunks it allocates: content and shape survive the
// single-allocation layout, duplicates and collisions behave, the figures
// return to zero, chunks outlive their store, and threads that add and drop
// chunks under the same keys (a chunk unregistering itself while another
// with its key goes in) keep the index consistent. Meant for the sanitizer
// presets as much as for the plain build.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/shareable_blocks.h"

namespace resound {
namespace {

ChunkMetadata Metadata(uint64_t key, const std::string& dtype, std::vector<int64_t> shape, int64_t num_steps) {
  ChunkMetadata m;
  m.key = key;
  m.dtype = DType::Parse(dtype);
  m.step_shape = std::move(shape);
  m.num_steps = num_steps;
  m.episode_id = key % 3;
  m.start_step = 5;
  m.end_step = 5 + num_steps - 1;
  m.uncompressed_size = Chunk::RawSize(m);
  return m;
}

std::vector<std::byte> Bytes(size_t size, uint64_t seed) {
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = std::byte((seed * 131 + i * 7) & 0xff);
  return bytes;
}

void Layout() {
  ChunkStore store;
  for (const auto& shape : {std::vector<int64_t>{}, std::vector<int64_t>{3}, std::vector<int64_t>{2, 0, 4},
                            std::vector<int64_t>{1, 2, 3, 4, 5, 6}}) {
    const ChunkMetadata m = Metadata(shape.size() + 1, "<i2", shape, 3);
    const auto payload = Bytes(static_cast<size_t>(m.uncompressed_size), m.key);
    const auto chunk = store.Insert(m, payload);
    RESOUND_CHECK(chunk->key() == m.key && chunk->num_steps() == 3 && chunk->dtype().str() == "<i2");
    RESOUND_CHECK(chunk->episode_id() == m.episode_id && chunk->start_step() == 5 && chunk->end_step() == 7);
    RESOUND_CHECK(std::vector<int64_t>(chunk->step_shape().begin(), chunk->step_shape().end()) == shape);
    RESOUND_CHECK(chunk->uncompressed_size() == m.uncompressed_size && chunk->data_size() == payload.size());
    RESOUND_CHECK(reinterpret_cast<uintptr_t>(chunk->data()) % 8 == 0);
    RESOUND_CHECK(std::vector<std::byte>(chunk->data(), chunk->data() + chunk->data_size()) == payload);
    RESOUND_CHECK(store.Find(m.key) == chunk);
  }
  // Compressed: the stored bytes are whatever the writer sent.
  ChunkMetadata lz4 = Metadata(99, "<f8", {100}, 2);
  lz4.compression = Compression::kLz4;
  const auto small = Bytes(17, 99);
  const auto chunk = store.Insert(lz4, small);
  RESOUND_CHECK(chunk->data_size() == 17 && chunk->uncompressed_size() == 1600 &&
                chunk->compression() == Compression::kLz4);
  RESOUND_CHECK(chunk->memory_bytes() < chunk->uncompressed_size());
}

void DuplicatesAndCollisions() {
  ChunkStore store;
  const ChunkMetadata m = Metadata(7, "<f4", {2}, 2);
  const auto payload = Bytes(16, 7);
  const auto first = store.Insert(m, payload);
  const int64_t memory = store.memory_bytes();
  RESOUND_CHECK(store.num_chunks() == 1 && memory == first->memory_bytes());
  RESOUND_CHECK(store.Insert(m, payload) == first);  // a resend gets the live chunk
  RESOUND_CHECK(store.num_chunks() == 1 && store.memory_bytes() == memory);
  const auto other = Bytes(16, 8);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { store.Insert(m, other); }));
  ChunkMetadata moved = m;
  moved.start_step = 6;
  moved.end_step = 7;
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { store.Insert(moved, payload); }));
  RESOUND_CHECK(store.Find(7) == first && store.num_chunks() == 1 && store.memory_bytes() == memory);
  // Bad metadata is refused before anything is allocated.
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { store.Insert(m, Bytes(15, 7)); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { DType::Parse("<f00000000000004"); }));
  RESOUND_CHECK(DType::Parse("<U0000000000004").itemsize() == 16);
  // Only sizes numpy has a type for: clients could not decode the others.
  for (const char* typestr : {"<f3", "<c2", "<f1", "<c4", "<i3", "<u16", "<f32", "<c12"}) {
    RESOUND_CHECK(Throws<InvalidArgumentError>([&] { DType::Parse(typestr); }));
    RESOUND_CHECK(DType::ParseStored(typestr).str() == typestr);  // what checkpoints hold
  }
  for (const char* typestr : {"<f2", "<f16", "<c8", "<c32", "|i1", "<u8", "|V3", "|S5", "<U7"}) {
    RESOUND_CHECK(DType::Parse(typestr).str() == typestr);
  }
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { DType::ParseStored("|b2"); }));
}

void Lifetimes() {
  std::shared_ptr<const Chunk> survivor;
  {
    auto store = std::make_unique<ChunkStore>(2);
    survivor = store->Insert(Metadata(1, "|u1", {5}, 1), Bytes(5, 1));
    auto dropped = store->Insert(Metadata(2, "|u1", {5}, 1), Bytes(5, 2));
    dropped.reset();
    RESOUND_CHECK(store->num_chunks() == 1 && store->Find(2) == nullptr);
    // The same key may come back once the old chunk is gone.
    auto again = store->Insert(Metadata(2, "|u1", {5}, 1), Bytes(5, 3));
    RESOUND_CHECK(store->Find(2) == again && store->num_chunks() == 2);
  }
  // The store is gone; the chunk still reads, and unregisters safely.
  RESOUND_CHECK(survivor->data()[0] == Bytes(5, 1)[0]);
  survivor.reset();
}

// Threads add, look up and drop chunks drawn from a small key range, so
// chunks die while others with the same key are being added.
void ConcurrentSameKeys() {
  ChunkStore store(4);
  constexpr int kThreads = 4;
  constexpr int kRounds = 4000;
  std::atomic<int> collisions{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::shared_ptr<const Chunk>> held;
      for (int round = 0; round < kRounds; ++round) {
        const uint64_t key = static_cast<uint64_t>(round * 7 + t) % 37;
        // Content depends on the key and on the thread only half of the time.
        const uint64_t flavour = (round % 2 == 0) ? 0 : static_cast<uint64_t>(t + 1);
        try {
          auto chunk = store.Insert(Metadata(key, "<i4", {4}, 1), Bytes(16, key * 10 + flavour));
          RESOUND_CHECK(chunk->key() == key);
          held.push_back(std::move(chunk));
        } catch (const InvalidArgumentError&) {
          collisions.fetch_add(1);  // a live chunk with this key holds other content
        }
        if (auto found = store.Find((key + 1) % 37)) RESOUND_CHECK(found->key() == (key + 1) % 37);
        if (held.size() > 5) held.erase(held.begin());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  RESOUND_CHECK(store.num_chunks() == 0 && store.memory_bytes() == 0);
  for (uint64_t key = 0; key < 37; ++key) RESOUND_CHECK(store.Find(key) == nullptr);
  std::printf("concurrent same keys: %d collisions\n", collisions.load());
}


// A source of blocks in one buffer, counting what it hands out.
class BufferSource final : public PayloadBlockSource {
 public:
  void* Allocate(size_t bytes) noexcept override {
    if (bytes > buffer_.size() - used_) return nullptr;
    void* block = buffer_.data() + used_;
    used_ += (bytes + 63) / 64 * 64;
    ++live_;
    return block;
  }
  void Free(void*, size_t) noexcept override { --live_; }
  std::optional<uint64_t> OffsetOf(const void* data, size_t bytes) const noexcept override {
    const auto* at = static_cast<const std::byte*>(data);
    if (at < buffer_.data() || at + bytes > buffer_.data() + buffer_.size()) return std::nullopt;
    return static_cast<uint64_t>(at - buffer_.data());
  }
  bool Holds(const void* data) const noexcept { return OffsetOf(data, 1).has_value(); }
  int live() const noexcept { return live_; }

 private:
  std::vector<std::byte> buffer_ = std::vector<std::byte>(1 << 20);
  size_t used_ = 0;
  int live_ = 0;
};

// A store with shareable payloads puts a large chunk's payload (only: not
// the chunk object with its reference counts) in the installed source, and
// gives the block back when the chunk goes; small chunks, and every chunk
// of an ordinary store, stay in ordinary memory.
void ShareablePayloads() {
  ChunkStore before(ChunkStore::kDefaultShards, Chunk::PayloadCopy::kCached, true);
  const auto early = before.Insert(Metadata(1, "<f4", {100'000}, 1), Bytes(400'000, 1));  // no source yet
  static BufferSource source;
  RESOUND_CHECK(ShareableBlocks::Install(source) && !ShareableBlocks::Install(source));
  RESOUND_CHECK(!source.Holds(early->data()));

  ChunkStore shareable(ChunkStore::kDefaultShards, Chunk::PayloadCopy::kCached, true);
  ChunkStore ordinary;
  const std::vector<std::byte> payload = Bytes(400'000, 2);
  auto large = shareable.Insert(Metadata(2, "<f4", {100'000}, 1), payload);
  const auto small = shareable.Insert(Metadata(3, "<f4", {100}, 1), Bytes(400, 3));
  const auto other = ordinary.Insert(Metadata(4, "<f4", {100'000}, 1), payload);
  RESOUND_CHECK(source.Holds(large->data()) && !source.Holds(large.get()) && source.live() == 1);
  RESOUND_CHECK(std::memcmp(large->data(), payload.data(), payload.size()) == 0);
  RESOUND_CHECK(large->step_shape().size() == 1 && large->step_shape()[0] == 100'000);
  RESOUND_CHECK(!source.Holds(small->data()) && !source.Holds(other->data()));
  RESOUND_CHECK(shareable.Find(2) == large && shareable.memory_bytes() > 400'000);
  large.reset();
  RESOUND_CHECK(source.live() == 0 && !shareable.Find(2) && shareable.num_chunks() == 1);
}

}  // namespace
}  // namespace resound

int main() {
  resound::Layout();
  resound::DuplicatesAndCollisions();
  resound::Lifetimes();
  resound::ConcurrentSameKeys();
  resound::ShareablePayloads();
  std::printf("chunk_store_test: OK\n");
  return 0;
}

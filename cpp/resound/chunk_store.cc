#include "resound/chunk_store.h"

#include <memory>
#include <string>

#include "resound/errors.h"
#include "resound/shareable_blocks.h"
#include "resound/trailing_allocator.h"

namespace resound {

class ChunkStore::StoredChunk : public Chunk {
 public:
  // `storage.data` holds Chunk::StorageBytes(metadata, payload.size()) bytes.
  StoredChunk(const StateRef& state, const ChunkMetadata& metadata, std::span<const std::byte> payload,
              const TrailingStorage& storage) noexcept
      : StoredChunk(state, metadata, payload, storage.data) {}

 protected:
  // The step shape and payload go to `storage` (StorageBytes of them,
  // 8-aligned, outliving the chunk).
  StoredChunk(const StateRef& state, const ChunkMetadata& metadata, std::span<const std::byte> payload,
              std::byte* storage) noexcept
      : Chunk(metadata, payload, storage, state->copy), state_(state) {
    // Counted for as long as the memory exists, so a rejected duplicate is
    // counted briefly too and the figures always return to their old values.
    state_->memory_bytes.fetch_add(memory_bytes(), std::memory_order_relaxed);
    state_->num_chunks.fetch_add(1, std::memory_order_relaxed);
  }

 public:
  StoredChunk(const StoredChunk&) = delete;
  StoredChunk& operator=(const StoredChunk&) = delete;

  // Runs when the last owner lets go; the memory is freed right after, by the
  // control block, once this has returned and the shard lock is released.
  ~StoredChunk() {
    {
      Shard& shard = state_->ShardFor(key());
      std::lock_guard<std::mutex> lock(shard.mu);
      const auto* slot = shard.chunks.Find(key());
      // The slot may hold a newer chunk with the same key (live), or never
      // have held this one (a rejected duplicate).
      if (slot != nullptr && slot->expired()) shard.chunks.Erase(key());
    }
    state_->memory_bytes.fetch_sub(memory_bytes(), std::memory_order_relaxed);
    state_->num_chunks.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  StateRef state_;
};

// A chunk whose step shape and payload lie in a block of the installed
// PayloadBlockSource (a same-host client's arena), the object and its
// control block in ordinary memory: reference counts must never be in
// memory another process shares (a forked child's copies of the handles
// would count down the parent's).
class ChunkStore::SharedPayloadChunk final : public StoredChunk {
 public:
  SharedPayloadChunk(const StateRef& state, const ChunkMetadata& metadata, std::span<const std::byte> payload,
                     SharedBlock block) noexcept
      : StoredChunk(state, metadata, payload, static_cast<std::byte*>(block.data())), block_(std::move(block)) {}

 private:
  // Freed before ~StoredChunk unregisters the chunk: no handle is left by
  // then, so nothing can find it and read the payload.
  SharedBlock block_;
};

ChunkStore::Shard& ChunkStore::State::ShardFor(uint64_t key) noexcept {
  // Keys are random 64-bit numbers, but mix them anyway so that sequential
  // keys (tests, simple clients) still spread over the shards.
  uint64_t h = key * 0x9E3779B97F4A7C15ULL;
  h ^= h >> 32;
  return shards[h % shards.size()];
}

ChunkStore::StateRef::StateRef(size_t num_shards, Chunk::PayloadCopy copy)
    : state_(std::make_unique<State>(num_shards, copy).release()) {}

ChunkStore::StateRef::StateRef(const StateRef& other) noexcept : state_(other.state_) {
  state_->owners.fetch_add(1, std::memory_order_relaxed);
}

ChunkStore::StateRef::~StateRef() {
  // acq_rel: the last owner sees every other owner's writes before freeing.
  if (state_->owners.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    const std::unique_ptr<State> last(state_);  // adopts it, and frees it here
  }
}

namespace {

size_t CheckedShards(size_t num_shards) {
  if (num_shards == 0) throw InvalidArgumentError("num_shards must be >= 1, got 0");
  return num_shards;
}

}  // namespace

ChunkStore::ChunkStore(size_t num_shards, Chunk::PayloadCopy copy, bool shareable_payloads)
    : state_(CheckedShards(num_shards), copy), shareable_payloads_(shareable_payloads) {}

std::shared_ptr<const Chunk> ChunkStore::Insert(const ChunkMetadata& metadata, std::span<const std::byte> payload) {
  Chunk::Validate(metadata, payload.size());
  // Recycled blocks: a chunk is often freed by another thread (an evicting
  // insert) than the one that made it (see block_recycler.h).
  // Allocate and copy before taking the shard lock. Both handles are declared
  // before the lock: a rejected duplicate, or an existing chunk whose other
  // owners let go meanwhile, must be destroyed after the lock is released,
  // since a chunk's destructor takes that lock.
  TrailingStorage storage{Chunk::StorageBytes(metadata, payload.size())};
  std::shared_ptr<const Chunk> candidate;
  if (shareable_payloads_ && storage.bytes >= ShareableBlocks::kMinSharedBytes) {
    if (SharedBlock block = SharedBlock::Allocate(storage.bytes)) {
      candidate = std::make_shared<SharedPayloadChunk>(state_, metadata, payload, std::move(block));
    }
  }
  if (!candidate) {
    candidate = AllocateSharedWithTrailing<StoredChunk, RecycledBlocks>(storage, state_, metadata, payload);
  }
  std::shared_ptr<const Chunk> existing;
  const uint64_t key = metadata.key;
  {
    Shard& shard = state_->ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    if (auto* slot = shard.chunks.Find(key)) {
      existing = slot->lock();
      if (!existing) *slot = candidate;  // replaces a chunk that is being destroyed
    } else {
      shard.chunks.TryEmplace(key, candidate);
    }
  }
  if (!existing) return candidate;
  if (!existing->SameContentAs(*candidate)) {
    throw InvalidArgumentError("chunk key " + std::to_string(key) +
                               " is already used by a live chunk with different content");
  }
  return existing;
}

std::shared_ptr<const Chunk> ChunkStore::Find(uint64_t key) const {
  Shard& shard = state_->ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto* slot = shard.chunks.Find(key);
  return slot == nullptr ? nullptr : slot->lock();
}

std::shared_ptr<const Chunk> ChunkStore::Get(uint64_t key) const {
  auto chunk = Find(key);
  if (!chunk) throw NotFoundError("chunk " + std::to_string(key) + " is not in the chunk store");
  return chunk;
}

size_t ChunkStore::num_chunks() const noexcept {
  return static_cast<size_t>(state_->num_chunks.load(std::memory_order_relaxed));
}

int64_t ChunkStore::memory_bytes() const noexcept {
  return state_->memory_bytes.load(std::memory_order_relaxed);
}

}  // namespace resound

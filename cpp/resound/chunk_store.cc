#include "resound/chunk_store.h"

#include <string>

#include "resound/errors.h"

namespace resound {

ChunkStore::Shard& ChunkStore::State::ShardFor(uint64_t key) noexcept {
  // Keys are random 64-bit numbers, but mix them anyway so that sequential
  // keys (tests, simple clients) still spread over the shards.
  uint64_t h = key * 0x9E3779B97F4A7C15ULL;
  h ^= h >> 32;
  return shards[h % shards.size()];
}

void ChunkStore::Deleter::operator()(Chunk* chunk) const noexcept {
  std::unique_ptr<Chunk> owned(chunk);  // freed when this function returns
  const uint64_t key = owned->key();
  {
    Shard& shard = state->ShardFor(key);
    std::lock_guard<std::mutex> lock(shard.mu);
    const auto* slot = shard.chunks.Find(key);
    // A new chunk with the same key may already have replaced this one.
    if (slot != nullptr && slot->expired()) shard.chunks.Erase(key);
  }
  state->memory_bytes.fetch_sub(owned->memory_bytes(), std::memory_order_relaxed);
  state->num_chunks.fetch_sub(1, std::memory_order_relaxed);
}

ChunkStore::ChunkStore(size_t num_shards) {
  if (num_shards == 0) throw InvalidArgumentError("num_shards must be >= 1, got 0");
  state_ = std::make_shared<State>(num_shards);
}

std::shared_ptr<const Chunk> ChunkStore::Insert(ChunkMetadata metadata, PayloadBuffer payload) {
  return Insert(Chunk(std::move(metadata), std::move(payload)));
}

std::shared_ptr<const Chunk> ChunkStore::Insert(Chunk&& chunk) {
  // Move the payload onto the heap before taking the shard lock. Declared
  // before the lock so that a duplicate is freed after the lock is released.
  auto candidate = std::make_unique<Chunk>(std::move(chunk));
  const uint64_t key = candidate->key();
  Shard& shard = state_->ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto& slot = *shard.chunks.TryEmplace(key, {}).first;
  if (auto existing = slot.lock()) {
    if (!existing->SameContentAs(*candidate)) {
      throw InvalidArgumentError("chunk key " + std::to_string(key) +
                                 " is already used by a live chunk with different content");
    }
    return existing;
  }
  state_->memory_bytes.fetch_add(candidate->memory_bytes(), std::memory_order_relaxed);
  state_->num_chunks.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<const Chunk> stored(std::unique_ptr<Chunk, Deleter>(candidate.release(), Deleter{state_}));
  slot = stored;
  return stored;
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

// Finds live chunks by key. The store does not own chunks: items, writers and
// in-flight requests own them through shared pointers, and a chunk leaves the
// store the moment its last owner lets go. That way one copy of the data serves
// every table and item that slices it, and nothing needs garbage collection.
//
// The index is split into shards, each with its own mutex, so writers adding
// different chunks rarely contend; a shard lock is only held for a hash-map
// lookup, never while payload memory is allocated, copied or freed.
#ifndef RESOUND_CHUNK_STORE_H_
#define RESOUND_CHUNK_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "resound/chunk.h"
#include "resound/key_map.h"

namespace resound {

class ChunkStore {
 public:
  static constexpr size_t kDefaultShards = 16;

  // `copy`: how payloads are copied into the chunks (Chunk::PayloadCopy).
  // `shareable_payloads`: large chunks are made in the installed
  // PayloadBlockSource's memory while it has room (a same-host client's
  // writers: see shareable_blocks.h).
  explicit ChunkStore(size_t num_shards = kDefaultShards, Chunk::PayloadCopy copy = Chunk::PayloadCopy::kStreamed,
                      bool shareable_payloads = false);
  ChunkStore(const ChunkStore&) = delete;
  ChunkStore& operator=(const ChunkStore&) = delete;

  // Validates `metadata` against `payload` (InvalidArgumentError), copies
  // both into a new chunk and returns a shared handle to it. If a live chunk
  // with the same key exists it is returned instead (a writer may resend a
  // chunk after a reconnect); a live chunk with the same key but other
  // content is a key collision and throws InvalidArgumentError. The caller
  // must keep the handle until an item references the chunk, or the chunk is
  // dropped.
  std::shared_ptr<const Chunk> Insert(const ChunkMetadata& metadata, std::span<const std::byte> payload);

  // The live chunk with `key`, or nullptr.
  std::shared_ptr<const Chunk> Find(uint64_t key) const;
  // The live chunk with `key`; throws NotFoundError naming the key.
  std::shared_ptr<const Chunk> Get(uint64_t key) const;

  // Number of live chunks and their memory (payload plus bookkeeping).
  size_t num_chunks() const noexcept;
  int64_t memory_bytes() const noexcept;

 private:
  // A slot of the index is free when its weak_ptr has no control block (an
  // expired one still marks a chunk that is being destroyed).
  struct NoChunk {
    template <typename V>
    static V Empty() noexcept {
      return V();
    }
    static bool IsEmpty(const std::weak_ptr<const Chunk>& chunk) noexcept {
      return !chunk.owner_before(std::weak_ptr<const Chunk>()) &&
             !std::weak_ptr<const Chunk>().owner_before(chunk);
    }
  };
  struct Shard {
    mutable std::mutex mu;
    KeyMap<std::weak_ptr<const Chunk>, NoChunk> chunks;
  };
  // Shared with every chunk so that a chunk outliving the store can still
  // unregister itself safely.
  struct State {
    State(size_t num_shards, Chunk::PayloadCopy payload_copy) : shards(num_shards), copy(payload_copy) {}
    Shard& ShardFor(uint64_t key) noexcept;
    std::vector<Shard> shards;
    const Chunk::PayloadCopy copy;
    std::atomic<int64_t> memory_bytes{0};
    std::atomic<int64_t> num_chunks{0};
    std::atomic<int64_t> owners{1};  // the store and its live chunks, see StateRef
  };
  // A counted handle to State, held by the store and by every chunk it made;
  // the last one to go frees it. Counted by hand rather than a shared_ptr
  // because each chunk keeps one: 8 bytes instead of 16, in the most
  // numerous object of a table.
  class StateRef {
   public:
    StateRef(size_t num_shards, Chunk::PayloadCopy copy);  // a new State, with this its only owner
    StateRef(const StateRef& other) noexcept;
    StateRef& operator=(const StateRef&) = delete;
    ~StateRef();
    State* operator->() const noexcept { return state_; }

   private:
    State* const state_;
  };
  // The chunk as the store allocates it: counted in the store's figures
  // while it exists, and unregistered from the index when its last owner
  // lets go; and one whose payload lies in a shareable block (both defined
  // in chunk_store.cc).
  class StoredChunk;
  class SharedPayloadChunk;

  StateRef state_;
  const bool shareable_payloads_;
};

}  // namespace resound

#endif  // RESOUND_CHUNK_STORE_H_

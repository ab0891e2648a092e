// The chunks one insert stream has sent to the server and not yet released.
//
// A client sends each chunk once per stream and then refers to it by key from
// any number of items, in this message or later ones; the server must keep the
// chunk alive in between, and must not let an item use a chunk that another
// stream sent (keys are the client's, so a key alone proves nothing). Holding
// the stream's chunks here does both: the holder owns them, and an item may
// only use keys the holder has.
//
// One stream is served by one thread, so a holder is not thread-safe.
#ifndef RESOUND_CHUNK_HOLDER_H_
#define RESOUND_CHUNK_HOLDER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "resound/chunk.h"
#include "resound/trajectory.h"

namespace resound {

class ChunkHolder {
 public:
  ChunkHolder() = default;
  ChunkHolder(const ChunkHolder&) = delete;
  ChunkHolder& operator=(const ChunkHolder&) = delete;

  // Keeps `chunk` until Release(chunk->key()); holding a key again replaces
  // the earlier chunk (the store hands out one chunk per live key).
  void Hold(std::shared_ptr<const Chunk> chunk);
  // Lets go of the chunk with `key`, if held; items using it keep it alive.
  void Release(uint64_t key) noexcept;

  // The held chunk with `key`, or nullptr.
  std::shared_ptr<const Chunk> Find(uint64_t key) const noexcept;
  bool Holds(uint64_t key) const noexcept { return chunks_.count(key) != 0; }
  size_t size() const noexcept { return chunks_.size(); }

  // Throws InvalidArgumentError naming `item_key` and the first chunk of
  // `trajectory` this holder does not have.
  void CheckHolds(uint64_t item_key, const Trajectory& trajectory) const;

 private:
  std::unordered_map<uint64_t, std::shared_ptr<const Chunk>> chunks_;
};

}  // namespace resound

#endif  // RESOUND_CHUNK_HOLDER_H_

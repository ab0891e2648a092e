#include "resound/chunk_holder.h"

#include <string>
#include <utility>

#include "resound/errors.h"

namespace resound {

void ChunkHolder::Hold(std::shared_ptr<const Chunk> chunk) {
  const uint64_t key = chunk->key();
  chunks_.insert_or_assign(key, std::move(chunk));
}

void ChunkHolder::Release(uint64_t key) noexcept { chunks_.erase(key); }

std::shared_ptr<const Chunk> ChunkHolder::Find(uint64_t key) const noexcept {
  const auto it = chunks_.find(key);
  return it == chunks_.end() ? nullptr : it->second;
}

void ChunkHolder::CheckHolds(uint64_t item_key, const Trajectory& trajectory) const {
  for (const TrajectoryColumn& column : trajectory) {
    for (const ChunkSlice& slice : column.slices) {
      if (!Holds(slice.chunk_key)) {
        throw InvalidArgumentError("item " + std::to_string(item_key) + " uses chunk " +
                                   std::to_string(slice.chunk_key) +
                                   ", which this stream has not sent (or has released)");
      }
    }
  }
}

}  // namespace resound

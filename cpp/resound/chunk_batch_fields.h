// The fields of a ChunkBatch message (protos/resound/v1/replay.proto) for a
// list of chunks: the distinct layouts (dtype, cell shape, encoding) and, per
// chunk, its key, layout index, steps and payload size: what
// wire::WriteChunkBatch writes for insert requests and sample responses.
#ifndef RESOUND_CHUNK_BATCH_FIELDS_H_
#define RESOUND_CHUNK_BATCH_FIELDS_H_

#include <cstdint>
#include <vector>

#include "resound/chunk.h"

namespace resound {

struct ChunkBatchFields {
  // Chunks (not owned) standing for each distinct layout, in order of first
  // appearance.
  std::vector<const Chunk*> layouts;
  std::vector<uint32_t> layout_indices;
  std::vector<uint64_t> keys;
  std::vector<int64_t> num_steps;
  std::vector<uint64_t> episode_ids;
  std::vector<int64_t> start_steps;
  std::vector<int64_t> end_steps;
  std::vector<int64_t> data_sizes;

  static ChunkBatchFields Of(const std::vector<const Chunk*>& chunks);
};

}  // namespace resound

#endif  // RESOUND_CHUNK_BATCH_FIELDS_H_

#include "resound/chunk_batch_fields.h"

#include <algorithm>

namespace resound {
namespace {

bool SameLayout(const Chunk& a, const Chunk& b) {
  const auto shape_a = a.step_shape();
  const auto shape_b = b.step_shape();
  return a.dtype().str() == b.dtype().str() && a.compression() == b.compression() &&
         a.delta_encoded() == b.delta_encoded() &&
         std::equal(shape_a.begin(), shape_a.end(), shape_b.begin(), shape_b.end());
}

}  // namespace

ChunkBatchFields ChunkBatchFields::Of(const std::vector<const Chunk*>& chunks) {
  ChunkBatchFields fields;
  // (Grown once each: a message of a few chunks made ~15 allocations here.)
  fields.layout_indices.reserve(chunks.size());
  fields.keys.reserve(chunks.size());
  fields.num_steps.reserve(chunks.size());
  fields.episode_ids.reserve(chunks.size());
  fields.start_steps.reserve(chunks.size());
  fields.end_steps.reserve(chunks.size());
  fields.data_sizes.reserve(chunks.size());
  for (const Chunk* chunk : chunks) {
    // Batches hold a handful of layouts: a linear search beats hashing.
    size_t layout = 0;
    while (layout < fields.layouts.size() && !SameLayout(*fields.layouts[layout], *chunk)) ++layout;
    if (layout == fields.layouts.size()) fields.layouts.push_back(chunk);
    fields.layout_indices.push_back(static_cast<uint32_t>(layout));
    fields.keys.push_back(chunk->key());
    fields.num_steps.push_back(chunk->num_steps());
    fields.episode_ids.push_back(chunk->episode_id());
    fields.start_steps.push_back(chunk->start_step());
    fields.end_steps.push_back(chunk->end_step());
    fields.data_sizes.push_back(static_cast<int64_t>(chunk->data_size()));
  }
  return fields;
}

}  // namespace resound

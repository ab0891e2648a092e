#include "resound/insert_request_encoder.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "resound/chunk_batch_fields.h"
#include "resound/packed_trajectories.h"
#include "resound/proto_writer.h"

namespace resound {
namespace {

// Field numbers of protos/resound/v1/replay.proto.
namespace insert_request {
constexpr uint32_t kChunks = 1, kItems = 2, kReleaseChunkKeys = 3, kChunkData = 4;
}
namespace chunk_batch {
constexpr uint32_t kLayouts = 1, kKeys = 2, kLayoutIndices = 3, kNumSteps = 4, kEpisodeIds = 5, kStartSteps = 6,
                   kEndSteps = 7, kDataSizes = 8;
}
namespace chunk_layout {
constexpr uint32_t kDtype = 1, kShape = 2, kCompression = 3, kDeltaEncoded = 4;
}
namespace item_batch {
constexpr uint32_t kTables = 1, kTableIndices = 2, kKeys = 3, kPriorities = 4, kTrajectories = 5;
}
namespace trajectories {
constexpr uint32_t kNumColumns = 1, kNumSlices = 2, kSqueeze = 3, kChunkKeys = 4, kOffsets = 5, kLengths = 6;
}

void WriteChunkBatch(ProtoWriter& out, const std::vector<const Chunk*>& chunks) {
  const ChunkBatchFields fields = ChunkBatchFields::Of(chunks);
  ProtoWriter batch;
  for (const Chunk* chunk : fields.layouts) {
    ProtoWriter layout;
    layout.BytesField(chunk_layout::kDtype, chunk->dtype().str());
    const auto shape = chunk->step_shape();
    layout.PackedVarints(chunk_layout::kShape, std::vector<int64_t>(shape.begin(), shape.end()));
    layout.BytesField(chunk_layout::kCompression, CompressionName(chunk->compression()));
    if (chunk->delta_encoded()) layout.VarintField(chunk_layout::kDeltaEncoded, 1);
    batch.MessageField(chunk_batch::kLayouts, layout);
  }
  batch.PackedVarints(chunk_batch::kKeys, fields.keys);
  batch.PackedVarints(chunk_batch::kLayoutIndices, fields.layout_indices);
  batch.PackedVarints(chunk_batch::kNumSteps, fields.num_steps);
  batch.PackedVarints(chunk_batch::kEpisodeIds, fields.episode_ids);
  batch.PackedVarints(chunk_batch::kStartSteps, fields.start_steps);
  batch.PackedVarints(chunk_batch::kEndSteps, fields.end_steps);
  batch.PackedVarints(chunk_batch::kDataSizes, fields.data_sizes);
  out.MessageField(insert_request::kChunks, batch);
}

}  // namespace

InsertRequestEncoder::InsertRequestEncoder(std::shared_ptr<const ChunkStore> store) : store_(std::move(store)) {}

void InsertRequestEncoder::Add(const std::string& table, uint64_t key, double priority, Trajectory trajectory) {
  Pending pending;
  for (const TrajectoryColumn& column : trajectory) {
    for (const ChunkSlice& slice : column.slices) {
      const bool seen = std::any_of(pending.chunks.begin(), pending.chunks.end(),
                                    [&](const auto& chunk) { return chunk->key() == slice.chunk_key; });
      if (seen) continue;
      pending.chunks.push_back(store_->Get(slice.chunk_key));  // NotFoundError: nothing queued
      pending.bytes += static_cast<int64_t>(pending.chunks.back()->data_size());
    }
  }
  auto [entry, added] = table_index_.try_emplace(table, static_cast<uint32_t>(tables_.size()));
  if (added) tables_.push_back(table);
  pending.table = entry->second;
  pending.key = key;
  pending.priority = priority;
  pending.trajectory = std::move(trajectory);
  in_flight_bytes_ += pending.bytes;
  queue_.push_back(std::move(pending));
}

void InsertRequestEncoder::TakeMessage(size_t max_items, size_t max_bytes,
                                       const std::function<char*(size_t)>& allocate) {
  std::vector<const Chunk*> new_chunks;
  size_t new_bytes = 0;
  PackedTrajectories packed;
  std::vector<uint32_t> table_indices;
  std::vector<uint64_t> keys;
  std::vector<double> priorities;
  while (!queue_.empty() && keys.size() < std::max<size_t>(max_items, 1)) {
    Pending& pending = queue_.front();
    size_t item_bytes = 0;
    for (const auto& chunk : pending.chunks) {
      if (!sent_.count(chunk->key())) item_bytes += chunk->data_size();
    }
    if (!keys.empty() && new_bytes + item_bytes > max_bytes) break;
    for (const auto& chunk : pending.chunks) {
      if (sent_.insert(chunk->key()).second) new_chunks.push_back(chunk.get());
    }
    new_bytes += item_bytes;
    packed.Append(pending.trajectory);
    table_indices.push_back(pending.table);
    keys.push_back(pending.key);
    priorities.push_back(pending.priority);
    unconfirmed_.push_back(std::move(pending));
    queue_.pop_front();
  }
  // A chunk gone from the store has no handle left anywhere: no item on its
  // way and no writer can use it again, so the server may let it go.
  std::vector<uint64_t> released;
  for (const uint64_t key : sent_) {
    if (!store_->Find(key)) released.push_back(key);
  }
  for (const uint64_t key : released) sent_.erase(key);

  ProtoWriter message;
  if (!new_chunks.empty()) WriteChunkBatch(message, new_chunks);
  if (!keys.empty()) {
    ProtoWriter items;
    for (const std::string& name : tables_) items.BytesField(item_batch::kTables, name);
    items.PackedVarints(item_batch::kTableIndices, table_indices);
    items.PackedVarints(item_batch::kKeys, keys);
    items.PackedDoubles(item_batch::kPriorities, priorities);
    ProtoWriter columns;
    columns.PackedVarints(trajectories::kNumColumns, packed.num_columns());
    columns.PackedVarints(trajectories::kNumSlices, packed.num_slices());
    columns.PackedVarints(trajectories::kSqueeze, packed.squeeze());
    columns.PackedVarints(trajectories::kChunkKeys, packed.chunk_keys());
    columns.PackedVarints(trajectories::kOffsets, packed.offsets());
    columns.PackedVarints(trajectories::kLengths, packed.lengths());
    items.MessageField(item_batch::kTrajectories, columns);
    message.MessageField(insert_request::kItems, items);
  }
  message.PackedVarints(insert_request::kReleaseChunkKeys, released);
  if (!new_chunks.empty()) {
    message.Tag(insert_request::kChunkData, ProtoWriter::kLengthDelimited);
    message.Varint(new_bytes);
  }
  // The payloads last, copied once, straight from the chunks.
  const std::string& head = message.data();
  char* out = allocate(head.size() + new_bytes);
  std::memcpy(out, head.data(), head.size());
  out += head.size();
  for (const Chunk* chunk : new_chunks) {
    std::memcpy(out, chunk->data(), chunk->data_size());
    out += chunk->data_size();
  }
}

size_t InsertRequestEncoder::Confirm(std::span<const uint64_t> keys) {
  size_t dropped = 0;
  for (const uint64_t key : keys) {
    if (unconfirmed_.empty() || unconfirmed_.front().key != key) continue;
    in_flight_bytes_ -= unconfirmed_.front().bytes;
    unconfirmed_.pop_front();
    ++dropped;
  }
  return dropped;
}

void InsertRequestEncoder::Requeue() {
  for (auto it = unconfirmed_.rbegin(); it != unconfirmed_.rend(); ++it) queue_.push_front(std::move(*it));
  unconfirmed_.clear();
  sent_.clear();
}

}  // namespace resound

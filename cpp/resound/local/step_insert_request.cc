#include "resound/local/step_insert_request.h"

#include <cstring>
#include <unordered_map>
#include <utility>

#include "resound/chunk.h"
#include "resound/errors.h"
#include "resound/local/fixed_fields.h"
#include "resound/packed_trajectories.h"
#include "resound/proto_writer.h"
#include "resound/wire_messages.h"

namespace resound::local {

StepInsertRequest::StepInsertRequest(std::vector<Field> fields, uint64_t episode_id, const std::vector<Item>& items)
    : fields_(std::move(fields)) {
  if (fields_.empty()) throw InvalidArgumentError("a step needs at least one field");
  if (items.empty()) throw InvalidArgumentError("a step needs at least one item");
  const size_t count = fields_.size();
  std::vector<uint64_t> keys;
  std::vector<uint32_t> layout_indices;
  std::vector<int64_t> data_sizes;
  Trajectory trajectory;
  ProtoWriter batch;
  for (size_t i = 0; i < count; ++i) {
    const Field& field = fields_[i];
    ChunkMetadata chunk;
    chunk.key = field.key;
    chunk.dtype = field.dtype;
    chunk.step_shape = field.shape;
    chunk.num_steps = 1;
    chunk.episode_id = episode_id;
    try {
      chunk.uncompressed_size = Chunk::RawSize(chunk);
      Chunk::Validate(chunk, field.data.size());
    } catch (const InvalidArgumentError& error) {
      throw InvalidArgumentError("field " + std::to_string(i) + ": " + error.what());
    }
    // A layout per field: a step has a few, and the server reads a layout
    // index per chunk either way.
    wire::WriteChunkLayout(batch, field.dtype, field.shape, Compression::kNone, /*delta_encoded=*/false);
    keys.push_back(field.key);
    layout_indices.push_back(static_cast<uint32_t>(i));
    data_sizes.push_back(static_cast<int64_t>(field.data.size()));
    data_bytes_ += field.data.size();
    trajectory.push_back({{{field.key, 0, 1}}, false});
  }
  namespace batch_fields = wire::chunk_batch;
  batch.PackedVarints(batch_fields::kKeys, keys);
  batch.PackedVarints(batch_fields::kLayoutIndices, layout_indices);
  batch.PackedVarints(batch_fields::kNumSteps, std::vector<int64_t>(count, 1));
  batch.PackedVarints(batch_fields::kEpisodeIds, std::vector<uint64_t>(count, episode_id));
  batch.PackedVarints(batch_fields::kStartSteps, std::vector<int64_t>(count, 0));
  batch.PackedVarints(batch_fields::kEndSteps, std::vector<int64_t>(count, 0));
  batch.PackedVarints(batch_fields::kDataSizes, data_sizes);

  ProtoWriter item_batch;
  std::unordered_map<std::string, uint32_t> table_index;
  std::vector<uint32_t> table_indices;
  std::vector<uint64_t> item_keys;
  std::vector<double> priorities;
  PackedTrajectories packed;
  for (const Item& item : items) {
    const auto [entry, added] = table_index.try_emplace(item.table, static_cast<uint32_t>(table_index.size()));
    if (added) item_batch.BytesField(wire::item_batch::kTables, item.table);
    table_indices.push_back(entry->second);
    item_keys.push_back(item.key);
    priorities.push_back(item.priority);
    packed.Append(trajectory);
  }
  item_batch.PackedVarints(wire::item_batch::kTableIndices, table_indices);
  item_batch.PackedVarints(wire::item_batch::kKeys, item_keys);
  item_batch.PackedDoubles(wire::item_batch::kPriorities, priorities);
  wire::WriteTrajectories(item_batch, wire::item_batch::kTrajectories, packed);

  ProtoWriter message;
  message.MessageField(wire::insert_request::kChunks, batch);
  message.MessageField(wire::insert_request::kItems, item_batch);
  message.PackedVarints(wire::insert_request::kReleaseChunkKeys, keys);
  message_ = std::move(message.mutable_data());
}

void StepInsertRequest::Write(std::span<std::byte> out) const noexcept {
  std::byte* at = out.data();
  PutField<uint64_t>(at, 0, message_.size());
  at += sizeof(uint64_t);
  std::memcpy(at, message_.data(), message_.size());
  at += message_.size();
  for (const Field& field : fields_) {
    if (!field.data.empty()) std::memcpy(at, field.data.data(), field.data.size());
    at += field.data.size();
  }
}

}  // namespace resound::local

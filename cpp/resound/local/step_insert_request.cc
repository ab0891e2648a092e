#include "resound/local/step_insert_request.h"

#include <cstring>
#include <string_view>
#include <utility>

#include "resound/chunk.h"
#include "resound/errors.h"
#include "resound/local/fixed_fields.h"
#include "resound/proto_writer.h"
#include "resound/wire_messages.h"

namespace resound::local {

namespace {

// A packed repeated varint field of `count` copies of `value`.
void RepeatedVarint(ProtoWriter& out, uint32_t field, uint64_t value, size_t count) {
  out.Tag(field, ProtoWriter::kLengthDelimited);
  out.Varint(ProtoWriter::VarintSize(value) * count);
  for (size_t i = 0; i < count; ++i) out.Varint(value);
}

}  // namespace

// Written field by field rather than through ChunkBatchFields and
// PackedTrajectories: their vectors cost a client.insert more than the rest
// of its message.
StepInsertRequest::StepInsertRequest(std::vector<Field> fields, uint64_t episode_id, const std::vector<Item>& items)
    : fields_(std::move(fields)) {
  if (fields_.empty()) throw InvalidArgumentError("a step needs at least one field");
  if (items.empty()) throw InvalidArgumentError("a step needs at least one item");
  const size_t count = fields_.size();
  std::vector<uint64_t> keys;
  std::vector<int64_t> data_sizes;
  keys.reserve(count);
  data_sizes.reserve(count);
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
    data_sizes.push_back(static_cast<int64_t>(field.data.size()));
    data_bytes_ += field.data.size();
  }
  namespace chunk_batch = wire::chunk_batch;
  batch.PackedVarints(chunk_batch::kKeys, keys);
  std::vector<uint32_t> layout_indices(count);
  for (size_t i = 0; i < count; ++i) layout_indices[i] = static_cast<uint32_t>(i);
  batch.PackedVarints(chunk_batch::kLayoutIndices, layout_indices);
  RepeatedVarint(batch, chunk_batch::kNumSteps, 1, count);
  RepeatedVarint(batch, chunk_batch::kEpisodeIds, episode_id, count);
  RepeatedVarint(batch, chunk_batch::kStartSteps, 0, count);
  RepeatedVarint(batch, chunk_batch::kEndSteps, 0, count);
  batch.PackedVarints(chunk_batch::kDataSizes, data_sizes);

  // Each item: every field's chunk, whole (one slice of one step, not squeezed).
  ProtoWriter trajectories;
  namespace columns = wire::trajectories;
  RepeatedVarint(trajectories, columns::kNumColumns, count, items.size());
  RepeatedVarint(trajectories, columns::kNumSlices, 1, count * items.size());
  RepeatedVarint(trajectories, columns::kSqueeze, 0, count * items.size());
  std::vector<uint64_t> chunk_keys;
  chunk_keys.reserve(count * items.size());
  for (size_t i = 0; i < items.size(); ++i) chunk_keys.insert(chunk_keys.end(), keys.begin(), keys.end());
  trajectories.PackedVarints(columns::kChunkKeys, chunk_keys);
  RepeatedVarint(trajectories, columns::kOffsets, 0, count * items.size());
  RepeatedVarint(trajectories, columns::kLengths, 1, count * items.size());

  ProtoWriter item_batch;
  std::vector<std::string_view> tables;  // a few: searched in order
  std::vector<uint32_t> table_indices;
  std::vector<uint64_t> item_keys;
  std::vector<double> priorities;
  for (const Item& item : items) {
    size_t index = 0;
    while (index < tables.size() && tables[index] != item.table) ++index;
    if (index == tables.size()) {
      tables.push_back(item.table);
      item_batch.BytesField(wire::item_batch::kTables, item.table);
    }
    table_indices.push_back(static_cast<uint32_t>(index));
    item_keys.push_back(item.key);
    priorities.push_back(item.priority);
  }
  item_batch.PackedVarints(wire::item_batch::kTableIndices, table_indices);
  item_batch.PackedVarints(wire::item_batch::kKeys, item_keys);
  item_batch.PackedDoubles(wire::item_batch::kPriorities, priorities);
  item_batch.MessageField(wire::item_batch::kTrajectories, trajectories);

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

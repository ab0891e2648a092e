#include "resound/wire_messages.h"

#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "resound/chunk_batch_fields.h"
#include "resound/errors.h"

namespace resound::wire {
namespace {

ChunkMetadata ReadLayout(ProtoReader reader) {
  ChunkMetadata layout;
  std::string dtype, compression;  // proto3: an absent string is empty
  while (reader.Next()) {
    switch (reader.field()) {
      case chunk_layout::kDtype:
        dtype = reader.string();
        break;
      case chunk_layout::kShape:
        reader.AppendVarints(layout.step_shape);
        break;
      case chunk_layout::kCompression:
        compression = reader.string();
        break;
      case chunk_layout::kDeltaEncoded:
        layout.delta_encoded = reader.varint() != 0;
        break;
      default:
        break;  // unknown fields are skipped, as protobuf does
    }
  }
  try {
    layout.dtype = DType::Parse(dtype);
    layout.compression = ParseCompression(compression.empty() ? "none" : compression);
  } catch (const InvalidArgumentError& error) {
    throw InvalidArgumentError(reader.what() + ": " + error.what());
  }
  return layout;
}

// The bytes of the chunks' payloads together.
size_t PayloadBytes(const std::vector<const Chunk*>& chunks) noexcept {
  size_t bytes = 0;
  for (const Chunk* chunk : chunks) bytes += chunk->data_size();
  return bytes;
}

// The chunks' payloads back to back at `out`.
void CopyPayloads(const std::vector<const Chunk*>& chunks, char* out) {
  for (const Chunk* chunk : chunks) {
    std::memcpy(out, chunk->data(), chunk->data_size());
    out += chunk->data_size();
  }
}

}  // namespace

void WriteChunkLayout(ProtoWriter& batch, const DType& dtype, std::span<const int64_t> step_shape,
                      Compression compression, bool delta_encoded) {
  ProtoWriter layout;
  layout.BytesField(chunk_layout::kDtype, dtype.str());
  layout.PackedVarints(chunk_layout::kShape, std::vector<int64_t>(step_shape.begin(), step_shape.end()));
  layout.BytesField(chunk_layout::kCompression, CompressionName(compression));
  if (delta_encoded) layout.VarintField(chunk_layout::kDeltaEncoded, 1);
  batch.MessageField(chunk_batch::kLayouts, layout);
}

void WriteChunkBatch(ProtoWriter& out, uint32_t field, const std::vector<const Chunk*>& chunks) {
  const ChunkBatchFields fields = ChunkBatchFields::Of(chunks);
  ProtoWriter batch;
  batch.Reserve(32 + 48 * chunks.size());  // about: see TakeMessage's reserves
  for (const Chunk* chunk : fields.layouts) {
    WriteChunkLayout(batch, chunk->dtype(), chunk->step_shape(), chunk->compression(), chunk->delta_encoded());
  }
  batch.PackedVarints(chunk_batch::kKeys, fields.keys);
  batch.PackedVarints(chunk_batch::kLayoutIndices, fields.layout_indices);
  batch.PackedVarints(chunk_batch::kNumSteps, fields.num_steps);
  batch.PackedVarints(chunk_batch::kEpisodeIds, fields.episode_ids);
  batch.PackedVarints(chunk_batch::kStartSteps, fields.start_steps);
  batch.PackedVarints(chunk_batch::kEndSteps, fields.end_steps);
  batch.PackedVarints(chunk_batch::kDataSizes, fields.data_sizes);
  out.MessageField(field, batch);
}

void WriteTrajectories(ProtoWriter& out, uint32_t field, const PackedTrajectories& packed) {
  ProtoWriter columns;
  columns.Reserve(32 + 4 * packed.size() + 24 * packed.chunk_keys().size());
  columns.PackedVarints(trajectories::kNumColumns, packed.num_columns());
  columns.PackedVarints(trajectories::kNumSlices, packed.num_slices());
  columns.PackedVarints(trajectories::kSqueeze, packed.squeeze());
  columns.PackedVarints(trajectories::kChunkKeys, packed.chunk_keys());
  columns.PackedVarints(trajectories::kOffsets, packed.offsets());
  columns.PackedVarints(trajectories::kLengths, packed.lengths());
  out.MessageField(field, columns);
}

void WriteWithPayloads(ProtoWriter& message, uint32_t field, const std::vector<const Chunk*>& chunks,
                       const std::function<char*(size_t)>& allocate) {
  const size_t bytes = PayloadBytes(chunks);
  if (bytes > 0) {
    message.Tag(field, ProtoWriter::kLengthDelimited);
    message.Varint(bytes);
  }
  const std::string& head = message.data();
  char* out = allocate(head.size() + bytes);
  std::memcpy(out, head.data(), head.size());
  CopyPayloads(chunks, out + head.size());
}

std::vector<size_t> WriteWithDataTail(const ProtoWriter& message, const std::vector<const Chunk*>& chunks,
                                      const std::function<char*(size_t)>& allocate,
                                      const PayloadBlockSource* arena) {
  std::vector<size_t> in_arena;
  std::vector<const Chunk*> in_data;
  std::vector<uint64_t> refs;
  if (arena != nullptr) {
    refs.reserve(chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) {
      const std::optional<uint64_t> offset = arena->OffsetOf(chunks[i]->data(), chunks[i]->data_size());
      refs.push_back(offset.value_or(kPayloadInData));
      if (offset) {
        in_arena.push_back(i);
      } else {
        in_data.push_back(chunks[i]);
      }
    }
  }
  const std::vector<const Chunk*>& copied = arena != nullptr ? in_data : chunks;
  const size_t bytes = PayloadBytes(copied);
  const std::string& head = message.data();
  const uint64_t head_size = head.size();
  const size_t table = refs.size() * sizeof(uint64_t);
  char* out = allocate(sizeof head_size + head.size() + table + bytes);
  std::memcpy(out, &head_size, sizeof head_size);
  std::memcpy(out + sizeof head_size, head.data(), head.size());
  out += sizeof head_size + head.size();
  if (table > 0) std::memcpy(out, refs.data(), table);
  CopyPayloads(copied, out + table);
  return in_arena;
}

std::vector<std::span<const std::byte>> PayloadsWithArenaRefs(const std::vector<uint64_t>& keys,
                                                              const std::vector<int64_t>& data_sizes,
                                                              std::span<const std::byte> data,
                                                              std::span<const std::byte> arena, uint64_t max_bytes) {
  const size_t count = data_sizes.size();
  if (keys.size() != count) {
    throw InvalidArgumentError("data_sizes has " + std::to_string(count) + " entries; keys has " +
                               std::to_string(keys.size()));
  }
  if (count > data.size() / sizeof(uint64_t)) {
    throw InvalidArgumentError("the data's arena table must hold one entry per chunk (" + std::to_string(count) +
                               "), it has room for " + std::to_string(data.size() / sizeof(uint64_t)));
  }
  std::vector<std::span<const std::byte>> payloads;
  payloads.reserve(count);
  // The table is read once, value by value, into what is kept: the client
  // may rewrite it meanwhile, and nothing checked is read twice.
  std::span<const std::byte> rest = data.subspan(count * sizeof(uint64_t));
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const auto invalid = [&](const std::string& why) {
      return InvalidArgumentError("chunk " + std::to_string(keys[i]) + " is invalid: " + why);
    };
    uint64_t ref = 0;
    std::memcpy(&ref, data.data() + i * sizeof(uint64_t), sizeof ref);
    const int64_t size = data_sizes[i];
    if (size < 0) throw invalid("its data size is negative");
    const auto bytes = static_cast<uint64_t>(size);
    if (bytes > max_bytes - total) {
      throw invalid("the message's payloads come to more than " + std::to_string(max_bytes) + " bytes");
    }
    total += bytes;
    if (ref == kPayloadInData) {
      if (bytes > rest.size()) throw invalid("its payload runs past the end of data");
      payloads.push_back(rest.first(bytes));
      rest = rest.subspan(bytes);
    } else {
      if (ref > arena.size() || bytes > arena.size() - ref) {
        throw invalid("its payload at " + std::to_string(ref) + " (" + std::to_string(bytes) +
                      " bytes) lies outside the client's payload arena (" + std::to_string(arena.size()) +
                      " bytes)");
      }
      payloads.push_back(arena.subspan(ref, bytes));
    }
  }
  if (!rest.empty()) {
    throw InvalidArgumentError("data holds " + std::to_string(rest.size()) + " bytes past the chunks' payloads");
  }
  return payloads;
}

std::vector<uint64_t> ReadInsertResponseKeys(std::span<const uint8_t> message) {
  ProtoReader reader(message, "InsertResponse");
  std::vector<uint64_t> keys;
  while (reader.Next()) {
    if (reader.field() == insert_response::kItemKeys) reader.AppendVarints(keys);
  }
  return keys;
}

ChunkBatchMessage ReadChunkBatch(ProtoReader reader) {
  ChunkBatchMessage batch;
  while (reader.Next()) {
    switch (reader.field()) {
      case chunk_batch::kLayouts:
        // Named by index, as errors about a layout say which it is.
        batch.layouts.push_back(
            ReadLayout(reader.Nested(("layouts[" + std::to_string(batch.layouts.size()) + "]").c_str())));
        break;
      case chunk_batch::kKeys:
        reader.AppendVarints(batch.keys);
        break;
      case chunk_batch::kLayoutIndices:
        reader.AppendVarints(batch.layout_indices);
        break;
      case chunk_batch::kNumSteps:
        reader.AppendVarints(batch.num_steps);
        break;
      case chunk_batch::kEpisodeIds:
        reader.AppendVarints(batch.episode_ids);
        break;
      case chunk_batch::kStartSteps:
        reader.AppendVarints(batch.start_steps);
        break;
      case chunk_batch::kEndSteps:
        reader.AppendVarints(batch.end_steps);
        break;
      case chunk_batch::kDataSizes:
        reader.AppendVarints(batch.data_sizes);
        break;
      default:
        break;
    }
  }
  return batch;
}

PackedTrajectories ReadTrajectories(ProtoReader reader) {
  std::vector<uint32_t> num_columns, num_slices;
  std::vector<uint8_t> squeeze;
  std::vector<uint64_t> chunk_keys;
  std::vector<int64_t> offsets, lengths;
  while (reader.Next()) {
    switch (reader.field()) {
      case trajectories::kNumColumns:
        reader.AppendVarints(num_columns);
        break;
      case trajectories::kNumSlices:
        reader.AppendVarints(num_slices);
        break;
      case trajectories::kSqueeze:
        reader.AppendVarints(squeeze);
        break;
      case trajectories::kChunkKeys:
        reader.AppendVarints(chunk_keys);
        break;
      case trajectories::kOffsets:
        reader.AppendVarints(offsets);
        break;
      case trajectories::kLengths:
        reader.AppendVarints(lengths);
        break;
      default:
        break;
    }
  }
  try {
    return PackedTrajectories(std::move(num_columns), std::move(num_slices), std::move(squeeze),
                              std::move(chunk_keys), std::move(offsets), std::move(lengths));
  } catch (const InvalidArgumentError& error) {
    throw InvalidArgumentError(reader.what() + ": " + error.what());
  }
}

namespace {

// InvalidArgumentError unless every column of `batch` has an entry per key.
void CheckColumnLengths(const ChunkBatchMessage& batch) {
  const size_t count = batch.keys.size();
  const auto check_length = [count](const char* name, size_t length) {
    if (length != count) {
      throw InvalidArgumentError(std::string(name) + " has " + std::to_string(length) + " entries; keys has " +
                                 std::to_string(count));
    }
  };
  check_length("layout_indices", batch.layout_indices.size());
  check_length("num_steps", batch.num_steps.size());
  check_length("episode_ids", batch.episode_ids.size());
  check_length("start_steps", batch.start_steps.size());
  check_length("end_steps", batch.end_steps.size());
  check_length("data_sizes", batch.data_sizes.size());
}

}  // namespace

std::vector<std::shared_ptr<const Chunk>> MakeChunks(const ChunkBatchMessage& batch,
                                                     std::span<const std::byte> payloads, ChunkStore& store) {
  CheckColumnLengths(batch);
  // Every size is checked before any chunk is made: a bad batch makes
  // nothing.
  std::vector<std::span<const std::byte>> spans;
  spans.reserve(batch.keys.size());
  size_t total = 0;
  for (size_t i = 0; i < batch.keys.size(); ++i) {
    const int64_t size = batch.data_sizes[i];
    if (size < 0 || static_cast<uint64_t>(size) > payloads.size() - total) {
      throw InvalidArgumentError("chunk " + std::to_string(batch.keys[i]) +
                                 " is invalid: data_sizes run past the end of data (" +
                                 std::to_string(payloads.size()) + " bytes)");
    }
    spans.push_back(payloads.subspan(total, static_cast<size_t>(size)));
    total += static_cast<size_t>(size);
  }
  if (total != payloads.size()) {
    throw InvalidArgumentError("data has " + std::to_string(payloads.size()) + " bytes but data_sizes add up to " +
                               std::to_string(total));
  }
  return MakeChunks(batch, spans, store);
}

std::vector<std::shared_ptr<const Chunk>> MakeChunks(const ChunkBatchMessage& batch,
                                                     std::span<const std::span<const std::byte>> payloads,
                                                     ChunkStore& store) {
  CheckColumnLengths(batch);
  const size_t count = batch.keys.size();
  if (payloads.size() != count) {
    throw InvalidArgumentError("the message has " + std::to_string(payloads.size()) + " chunk payloads for " +
                               std::to_string(count) + " chunks");
  }
  for (size_t i = 0; i < count; ++i) {
    if (batch.data_sizes[i] < 0 || payloads[i].size() != static_cast<uint64_t>(batch.data_sizes[i])) {
      throw InvalidArgumentError("chunk " + std::to_string(batch.keys[i]) + " is invalid: data_sizes says " +
                                 std::to_string(batch.data_sizes[i]) + " bytes, its payload has " +
                                 std::to_string(payloads[i].size()));
    }
    if (batch.layout_indices[i] >= batch.layouts.size()) {
      throw InvalidArgumentError("chunk " + std::to_string(batch.keys[i]) + " is invalid: layout index " +
                                 std::to_string(batch.layout_indices[i]) + " is not below the " +
                                 std::to_string(batch.layouts.size()) + " layouts");
    }
  }
  std::vector<std::shared_ptr<const Chunk>> made;
  made.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    ChunkMetadata metadata = batch.layouts[batch.layout_indices[i]];
    metadata.key = batch.keys[i];
    metadata.num_steps = batch.num_steps[i];
    metadata.episode_id = batch.episode_ids[i];
    metadata.start_step = batch.start_steps[i];
    metadata.end_step = batch.end_steps[i];
    try {
      metadata.uncompressed_size = Chunk::RawSize(metadata);
      made.push_back(store.Insert(metadata, payloads[i]));
    } catch (const InvalidArgumentError& error) {
      throw InvalidArgumentError("chunk " + std::to_string(metadata.key) + " is invalid: " + error.what());
    }
  }
  return made;
}

}  // namespace resound::wire

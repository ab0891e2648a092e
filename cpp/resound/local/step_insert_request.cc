#include "resound/local/step_insert_request.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

#include "resound/errors.h"
#include "resound/local/fixed_fields.h"

namespace resound::local {

namespace {

constexpr size_t kHeaderBytes = 16;       // u64 episode id, u32 fields, u32 items
constexpr size_t kDTypeBytes = 16;        // DType::kMaxLength characters and a zero
constexpr size_t kFieldBytes = 40;        // u64 key, u64 bytes, dtype, u32 dimensions, u32 0
constexpr size_t kItemHeaderBytes = 24;   // u64 key, f64 priority, u32 name bytes, u32 0
static_assert(DType::kMaxLength < kDTypeBytes);

constexpr size_t Padded(size_t bytes) noexcept { return (bytes + 7) / 8 * 8; }

}  // namespace

StepInsertRequest::StepInsertRequest(std::vector<Field> fields, uint64_t episode_id, std::vector<Item> items)
    : fields_(std::move(fields)), episode_id_(episode_id), items_(std::move(items)) {
  Check();
}

void StepInsertRequest::Check() {
  if (fields_.empty()) throw InvalidArgumentError("a step needs at least one field");
  if (items_.empty()) throw InvalidArgumentError("a step needs at least one item");
  // (Counts the u32 words cannot hold have no room in any region anyway.)
  if (fields_.size() > std::numeric_limits<uint32_t>::max() || items_.size() > std::numeric_limits<uint32_t>::max()) {
    throw InvalidArgumentError("a step of more fields or items than a request holds");
  }
  message_bytes_ = kHeaderBytes + kFieldBytes * fields_.size();
  data_bytes_ = 0;
  for (size_t i = 0; i < fields_.size(); ++i) {
    const Field& field = fields_[i];
    try {
      if (field.shape.size() > kMaxDimensions) {
        throw InvalidArgumentError("a shape of " + std::to_string(field.shape.size()) + " dimensions, more than " +
                                   std::to_string(kMaxDimensions));
      }
      Chunk::Validate(ChunkOf(i), field.data.size());
    } catch (const InvalidArgumentError& error) {
      throw InvalidArgumentError("field " + std::to_string(i) + ": " + error.what());
    }
    message_bytes_ += sizeof(int64_t) * field.shape.size();
    data_bytes_ += field.data.size();
  }
  for (const Item& item : items_) {
    if (item.table.size() > kMaxTableBytes) {
      throw InvalidArgumentError("item " + std::to_string(item.key) + ": a table name of " +
                                 std::to_string(item.table.size()) + " bytes, longer than " +
                                 std::to_string(kMaxTableBytes));
    }
    message_bytes_ += kItemHeaderBytes + Padded(item.table.size());
  }
}

ChunkMetadata StepInsertRequest::ChunkOf(size_t index) const {
  const Field& field = fields_[index];
  ChunkMetadata chunk;
  chunk.key = field.key;
  chunk.dtype = field.dtype;
  chunk.step_shape = field.shape;
  chunk.num_steps = 1;
  chunk.episode_id = episode_id_;
  chunk.uncompressed_size = Chunk::RawSize(chunk);
  return chunk;
}

void StepInsertRequest::Write(std::span<std::byte> out) const noexcept {
  std::byte* at = out.data();
  PutField<uint64_t>(at, 0, message_bytes_);
  at += sizeof(uint64_t);
  std::memset(at, 0, message_bytes_);  // the padding
  PutField<uint64_t>(at, 0, episode_id_);
  PutField<uint32_t>(at, 8, static_cast<uint32_t>(fields_.size()));
  PutField<uint32_t>(at, 12, static_cast<uint32_t>(items_.size()));
  at += kHeaderBytes;
  for (const Field& field : fields_) {
    PutField<uint64_t>(at, 0, field.key);
    PutField<uint64_t>(at, 8, field.data.size());
    const std::string_view dtype = field.dtype.str();
    std::memcpy(at + 16, dtype.data(), dtype.size());
    PutField<uint32_t>(at, 16 + kDTypeBytes, static_cast<uint32_t>(field.shape.size()));
    at += kFieldBytes;
  }
  for (const Field& field : fields_) {
    if (!field.shape.empty()) std::memcpy(at, field.shape.data(), sizeof(int64_t) * field.shape.size());
    at += sizeof(int64_t) * field.shape.size();
  }
  for (const Item& item : items_) {
    PutField<uint64_t>(at, 0, item.key);
    PutField<double>(at, 8, item.priority);
    PutField<uint32_t>(at, 16, static_cast<uint32_t>(item.table.size()));
    if (!item.table.empty()) std::memcpy(at + kItemHeaderBytes, item.table.data(), item.table.size());
    at += kItemHeaderBytes + Padded(item.table.size());
  }
  for (const Field& field : fields_) {
    if (!field.data.empty()) std::memcpy(at, field.data.data(), field.data.size());
    at += field.data.size();
  }
}

StepInsertRequest StepInsertRequest::Read(std::span<const std::byte> message, std::span<const std::byte> data_tail) {
  const auto malformed = [&](const std::string& what) {
    return InvalidArgumentError("malformed step insert request (" + std::to_string(message.size()) + " bytes): " +
                                what);
  };
  // The reads below stay inside `message`: each record is checked to fit
  // before it is read, against what is left of it.
  size_t left = message.size();
  const std::byte* at = message.data();
  const auto take = [&](size_t bytes, const char* what) {
    if (bytes > left) throw malformed(std::string("it ends inside ") + what);
    const std::byte* record = at;
    at += bytes;
    left -= bytes;
    return record;
  };
  StepInsertRequest request;
  const std::byte* header = take(kHeaderBytes, "its header");
  request.episode_id_ = GetField<uint64_t>(header, 0);
  const auto num_fields = GetField<uint32_t>(header, 8);
  const auto num_items = GetField<uint32_t>(header, 12);
  // Each count checked against the size first: no vector larger than the
  // message can describe is made.
  if (num_fields > left / kFieldBytes || num_items > left / kItemHeaderBytes) {
    throw malformed("more fields or items than it has bytes for");
  }
  request.fields_.resize(num_fields);
  std::vector<uint32_t> dimensions(num_fields);
  for (uint32_t i = 0; i < num_fields; ++i) {
    const std::byte* record = take(kFieldBytes, "a field");
    Field& field = request.fields_[i];
    field.key = GetField<uint64_t>(record, 0);
    const auto data_bytes = GetField<uint64_t>(record, 8);
    const auto* text = reinterpret_cast<const char*>(record + 16);
    const size_t length = std::find(text, text + kDTypeBytes, '\0') - text;
    if (length == kDTypeBytes || std::any_of(text + length, text + kDTypeBytes, [](char c) { return c != '\0'; })) {
      throw malformed("field " + std::to_string(i) + "'s dtype is not a zero-padded string");
    }
    try {
      field.dtype = DType::Parse(std::string_view(text, length));
    } catch (const InvalidArgumentError& error) {
      throw malformed("field " + std::to_string(i) + ": " + error.what());
    }
    dimensions[i] = GetField<uint32_t>(record, 16 + kDTypeBytes);
    if (GetField<uint32_t>(record, 20 + kDTypeBytes) != 0) {
      throw malformed("field " + std::to_string(i) + " has a reserved word that is not 0");
    }
    if (dimensions[i] > kMaxDimensions) {
      throw malformed("field " + std::to_string(i) + " has " + std::to_string(dimensions[i]) +
                      " dimensions, more than " + std::to_string(kMaxDimensions));
    }
    if (data_bytes > data_tail.size() - request.data_bytes_) {
      throw malformed("its fields' payloads run past the end of its data (" + std::to_string(data_tail.size()) +
                      " bytes)");
    }
    field.data = data_tail.subspan(request.data_bytes_, static_cast<size_t>(data_bytes));
    request.data_bytes_ += static_cast<size_t>(data_bytes);
  }
  if (request.data_bytes_ != data_tail.size()) {
    throw malformed("its data has " + std::to_string(data_tail.size()) + " bytes, its fields' payloads " +
                    std::to_string(request.data_bytes_));
  }
  for (uint32_t i = 0; i < num_fields; ++i) {
    const std::byte* shape = take(sizeof(int64_t) * dimensions[i], "a field's shape");
    request.fields_[i].shape.resize(dimensions[i]);
    if (dimensions[i] > 0) std::memcpy(request.fields_[i].shape.data(), shape, sizeof(int64_t) * dimensions[i]);
  }
  request.items_.resize(num_items);
  for (Item& item : request.items_) {
    const std::byte* record = take(kItemHeaderBytes, "an item");
    item.key = GetField<uint64_t>(record, 0);
    item.priority = GetField<double>(record, 8);
    const auto table_bytes = GetField<uint32_t>(record, 16);
    if (GetField<uint32_t>(record, 20) != 0) {
      throw malformed("item " + std::to_string(item.key) + " has a reserved word that is not 0");
    }
    if (table_bytes > kMaxTableBytes) {
      throw malformed("item " + std::to_string(item.key) + " has a table name of " + std::to_string(table_bytes) +
                      " bytes, longer than " + std::to_string(kMaxTableBytes));
    }
    const std::byte* name = take(Padded(table_bytes), "a table name");
    item.table.assign(reinterpret_cast<const char*>(name), table_bytes);
  }
  if (left != 0) throw malformed(std::to_string(left) + " bytes after its last item");
  try {
    request.Check();
  } catch (const InvalidArgumentError& error) {
    throw malformed(error.what());
  }
  return request;
}

}  // namespace resound::local

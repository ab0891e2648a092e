#include "resound/chunk.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

#include "resound/bulk_copy.h"
#include "resound/errors.h"

namespace resound {
namespace {

// The rank is stored in 16 bits; numpy itself allows at most 64 dimensions.
constexpr size_t kMaxRank = std::numeric_limits<uint16_t>::max();

}  // namespace

Compression ParseCompression(const std::string& name) {
  if (name == "none") return Compression::kNone;
  if (name == "lz4") return Compression::kLz4;
  throw InvalidArgumentError("compression must be one of 'none', 'lz4'; got '" + name + "'");
}

const char* CompressionName(Compression compression) noexcept {
  switch (compression) {
    case Compression::kNone:
      return "none";
    case Compression::kLz4:
      return "lz4";
  }
  return "unknown";
}

int64_t Chunk::RawSize(const ChunkMetadata& m) {
  const auto where = [&m] { return "chunk " + std::to_string(m.key) + ": "; };
  if (m.num_steps < 1) {
    throw InvalidArgumentError(where() + "num_steps must be >= 1, got " + std::to_string(m.num_steps));
  }
  if (m.step_shape.size() > kMaxRank) {
    throw InvalidArgumentError(where() + "shape has more than " + std::to_string(kMaxRank) + " dimensions");
  }
  // The shape comes from clients: check every product for overflow.
  int64_t elements = m.num_steps;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (const int64_t dim : m.step_shape) {
    if (dim < 0) {
      throw InvalidArgumentError(where() + "shape dimensions must be >= 0, got " + std::to_string(dim));
    }
    if (dim != 0 && elements > kMax / dim) throw InvalidArgumentError(where() + "shape is too large");
    elements *= dim;
  }
  if (elements != 0 && m.dtype.itemsize() > kMax / elements) {
    throw InvalidArgumentError(where() + "shape is too large");
  }
  return elements * m.dtype.itemsize();
}

void Chunk::Validate(const ChunkMetadata& m, size_t payload_size) {
  const auto where = [&m] { return "chunk " + std::to_string(m.key) + ": "; };
  const int64_t raw_size = RawSize(m);
  if (m.uncompressed_size != raw_size) {
    throw InvalidArgumentError(where() + "uncompressed_size must be num_steps * prod(shape) * itemsize = " +
                               std::to_string(raw_size) + ", got " +
                               std::to_string(m.uncompressed_size));
  }
  if (m.compression == Compression::kNone && static_cast<int64_t>(payload_size) != raw_size) {
    throw InvalidArgumentError(where() + "uncompressed data must hold " + std::to_string(raw_size) +
                               " bytes, got " + std::to_string(payload_size));
  }
  if (m.start_step < 0) {
    throw InvalidArgumentError(where() + "start_step must be >= 0, got " + std::to_string(m.start_step));
  }
  // Steps may have gaps (sparse chunks), never fewer steps than cells.
  if (m.end_step < m.start_step || m.end_step - m.start_step < m.num_steps - 1) {
    throw InvalidArgumentError(where() + "end_step must be >= start_step + num_steps - 1, got start_step " +
                               std::to_string(m.start_step) + ", num_steps " +
                               std::to_string(m.num_steps) + ", end_step " + std::to_string(m.end_step));
  }
}

size_t Chunk::StorageBytes(const ChunkMetadata& metadata, size_t payload_size) noexcept {
  return metadata.step_shape.size() * sizeof(int64_t) + payload_size;
}

Chunk::Chunk(const ChunkMetadata& m, std::span<const std::byte> payload, std::byte* storage, PayloadCopy copy) noexcept
    : key_(m.key),
      episode_id_(m.episode_id),
      num_steps_(m.num_steps),
      start_step_(m.start_step),
      end_step_(m.end_step),
      data_size_(payload.size()),
      storage_(storage),
      dtype_(m.dtype),
      rank_(static_cast<uint16_t>(m.step_shape.size())),
      compression_(m.compression),
      delta_encoded_(m.delta_encoded) {
  // Start the lifetime of the dimensions as int64_t objects, then the payload
  // right behind them (8-byte aligned, as numpy wants for any dtype).
  std::uninitialized_copy(m.step_shape.begin(), m.step_shape.end(), reinterpret_cast<int64_t*>(storage_));
  std::byte* const data = storage_ + rank_ * sizeof(int64_t);
  if (payload.empty()) return;
  if (copy == PayloadCopy::kCached) {
    std::memcpy(data, payload.data(), payload.size());
  } else {
    BulkCopy::Copy(data, payload.data(), payload.size());
  }
}

std::span<const int64_t> Chunk::step_shape() const noexcept {
  return {std::launder(reinterpret_cast<const int64_t*>(storage_)), rank_};
}

int64_t Chunk::uncompressed_size() const noexcept {
  // Validate() checked this product against overflow when the chunk was made.
  int64_t size = num_steps_ * dtype_.itemsize();
  for (const int64_t dim : step_shape()) size *= dim;
  return size;
}

int64_t Chunk::memory_bytes() const noexcept {
  // The object, the store's link (8 bytes), the control block (16), the
  // block's size (8) and malloc's header (8) share one block with the shape
  // and the payload.
  constexpr int64_t kOverhead = sizeof(Chunk) + 40;
  return static_cast<int64_t>(data_size_ + rank_ * sizeof(int64_t)) + kOverhead;
}

bool Chunk::SameContentAs(const Chunk& other) const noexcept {
  const auto a = step_shape();
  const auto b = other.step_shape();
  return key_ == other.key_ && dtype_ == other.dtype_ && std::equal(a.begin(), a.end(), b.begin(), b.end()) &&
         num_steps_ == other.num_steps_ && compression_ == other.compression_ &&
         delta_encoded_ == other.delta_encoded_ && episode_id_ == other.episode_id_ &&
         start_step_ == other.start_step_ && end_step_ == other.end_step_ && data_size_ == other.data_size_ &&
         (data_size_ == 0 || std::memcmp(data(), other.data(), data_size_) == 0);
}

}  // namespace resound

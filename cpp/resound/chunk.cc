#include "resound/chunk.h"

#include <cstring>
#include <limits>

#include "resound/errors.h"

namespace resound {

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
  const std::string where = "chunk " + std::to_string(m.key) + ": ";
  if (m.num_steps < 1) {
    throw InvalidArgumentError(where + "num_steps must be >= 1, got " + std::to_string(m.num_steps));
  }
  // The shape comes from clients: check every product for overflow.
  int64_t elements = m.num_steps;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (const int64_t dim : m.step_shape) {
    if (dim < 0) {
      throw InvalidArgumentError(where + "shape dimensions must be >= 0, got " + std::to_string(dim));
    }
    if (dim != 0 && elements > kMax / dim) throw InvalidArgumentError(where + "shape is too large");
    elements *= dim;
  }
  if (elements != 0 && m.dtype.itemsize() > kMax / elements) {
    throw InvalidArgumentError(where + "shape is too large");
  }
  return elements * m.dtype.itemsize();
}

Chunk::Chunk(ChunkMetadata metadata, PayloadBuffer payload)
    : metadata_(std::move(metadata)), payload_(std::move(payload)) {
  const auto& m = metadata_;
  const std::string where = "chunk " + std::to_string(m.key) + ": ";
  const int64_t raw_size = RawSize(m);
  if (m.uncompressed_size != raw_size) {
    throw InvalidArgumentError(where + "uncompressed_size must be num_steps * prod(shape) * itemsize = " +
                               std::to_string(raw_size) + ", got " +
                               std::to_string(m.uncompressed_size));
  }
  if (m.compression == Compression::kNone && static_cast<int64_t>(payload_.size()) != raw_size) {
    throw InvalidArgumentError(where + "uncompressed data must hold " + std::to_string(raw_size) +
                               " bytes, got " + std::to_string(payload_.size()));
  }
  if (m.start_step < 0) {
    throw InvalidArgumentError(where + "start_step must be >= 0, got " + std::to_string(m.start_step));
  }
  // Steps may have gaps (sparse chunks), never fewer steps than cells.
  if (m.end_step < m.start_step || m.end_step - m.start_step < m.num_steps - 1) {
    throw InvalidArgumentError(where + "end_step must be >= start_step + num_steps - 1, got start_step " +
                               std::to_string(m.start_step) + ", num_steps " +
                               std::to_string(m.num_steps) + ", end_step " + std::to_string(m.end_step));
  }
}

int64_t Chunk::memory_bytes() const noexcept {
  // Object, metadata vectors and the shared_ptr control block.
  constexpr int64_t kOverhead = sizeof(Chunk) + 64;
  return static_cast<int64_t>(payload_.size()) + kOverhead +
         static_cast<int64_t>(metadata_.step_shape.size() * sizeof(int64_t));
}

bool Chunk::SameContentAs(const Chunk& other) const noexcept {
  const auto& a = metadata_;
  const auto& b = other.metadata_;
  return a.key == b.key && a.dtype == b.dtype && a.step_shape == b.step_shape &&
         a.num_steps == b.num_steps && a.compression == b.compression &&
         a.delta_encoded == b.delta_encoded && a.episode_id == b.episode_id &&
         a.start_step == b.start_step && a.end_step == b.end_step &&
         a.uncompressed_size == b.uncompressed_size && payload_.size() == other.payload_.size() &&
         (payload_.size() == 0 || std::memcmp(payload_.data(), other.payload_.data(), payload_.size()) == 0);
}

}  // namespace resound

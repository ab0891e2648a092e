// An immutable block of trajectory data for one column: `num_steps` cells of
// `step_shape` elements of `dtype`, stored as opaque (possibly compressed)
// bytes. Chunks are created once by a writer, shared by every item that
// slices them and never modified, so readers need no lock to use them.
#ifndef RESOUND_CHUNK_H_
#define RESOUND_CHUNK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "resound/dtype.h"
#include "resound/payload_buffer.h"

namespace resound {

enum class Compression : uint8_t { kNone = 0, kLz4 = 1 };

// Parses "none" / "lz4"; throws InvalidArgumentError naming `compression`.
Compression ParseCompression(const std::string& name);
const char* CompressionName(Compression compression) noexcept;

// Everything about a chunk except its payload.
struct ChunkMetadata {
  uint64_t key = 0;
  DType dtype = DType::Parse("<f4");
  std::vector<int64_t> step_shape;  // shape of one step (cell)
  int64_t num_steps = 0;
  Compression compression = Compression::kNone;
  bool delta_encoded = false;
  uint64_t episode_id = 0;
  int64_t start_step = 0;  // episode step of the first cell
  int64_t end_step = 0;    // episode step of the last cell (inclusive)
  int64_t uncompressed_size = 0;  // bytes of the raw, stacked cells
};

class Chunk {
 public:
  // Validates the metadata against the payload; throws InvalidArgumentError
  // naming the inconsistent field.
  Chunk(ChunkMetadata metadata, PayloadBuffer payload);

  // num_steps * prod(step_shape) * itemsize, checked for negative dimensions
  // and overflow (InvalidArgumentError naming the chunk).
  static int64_t RawSize(const ChunkMetadata& metadata);

  Chunk(Chunk&&) noexcept = default;
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  const ChunkMetadata& metadata() const noexcept { return metadata_; }
  uint64_t key() const noexcept { return metadata_.key; }
  int64_t num_steps() const noexcept { return metadata_.num_steps; }
  const DType& dtype() const noexcept { return metadata_.dtype; }
  const std::vector<int64_t>& step_shape() const noexcept { return metadata_.step_shape; }
  uint64_t episode_id() const noexcept { return metadata_.episode_id; }
  const std::byte* data() const noexcept { return payload_.data(); }
  size_t data_size() const noexcept { return payload_.size(); }
  // Bytes this chunk holds in memory: payload plus a fixed estimate of its
  // bookkeeping, used for the memory figures in table and store info.
  int64_t memory_bytes() const noexcept;

  // True when both chunks describe the same data (metadata and payload).
  bool SameContentAs(const Chunk& other) const noexcept;

 private:
  ChunkMetadata metadata_;
  PayloadBuffer payload_;
};

}  // namespace resound

#endif  // RESOUND_CHUNK_H_

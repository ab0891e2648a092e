// An immutable block of trajectory data for one column: `num_steps` cells of
// `step_shape` elements of `dtype`, stored as opaque (possibly compressed)
// bytes. Chunks are created once by a writer, shared by every item that
// slices them and never modified, so readers need no lock to use them.
//
// Only a ChunkStore makes chunks. It puts the chunk, its step shape and its
// payload in one allocation together with the shared_ptr control block, so a
// chunk costs a single heap block beyond its payload bytes.
#ifndef RESOUND_CHUNK_H_
#define RESOUND_CHUNK_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "resound/dtype.h"

namespace resound {

enum class Compression : uint8_t { kNone = 0, kLz4 = 1 };

// Parses "none" / "lz4"; throws InvalidArgumentError naming `compression`.
Compression ParseCompression(const std::string& name);
const char* CompressionName(Compression compression) noexcept;

// Everything about a chunk except its payload: the description a writer
// sends. The chunk keeps these values in a compact form of its own.
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
  // How a payload is copied into its chunk. kStreamed (a table's chunks):
  // large payloads bypass the caches (BulkCopy), as the chunk is read again
  // only when sampled, long after. kCached (a remote writer's chunks): the
  // ordinary copy, which leaves the payload in the cache where its send
  // reads it a moment later (a 400 KB step's send over the same-host
  // transport took ~30 % longer reading a streamed chunk back from memory).
  enum class PayloadCopy : uint8_t { kStreamed, kCached };

  // num_steps * prod(step_shape) * itemsize, checked for negative dimensions
  // and overflow (InvalidArgumentError naming the chunk).
  static int64_t RawSize(const ChunkMetadata& metadata);

  // Throws InvalidArgumentError naming the inconsistent field unless
  // `metadata` describes a valid chunk whose payload has `payload_size` bytes.
  static void Validate(const ChunkMetadata& metadata, size_t payload_size);

  // Bytes of storage a chunk needs beside the object: its step shape and
  // its payload.
  static size_t StorageBytes(const ChunkMetadata& metadata, size_t payload_size) noexcept;

  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;
  // Public for pybind11's holder machinery; chunks are only ever destroyed
  // through the store's shared_ptr control block, which knows their type.
  ~Chunk() = default;

  uint64_t key() const noexcept { return key_; }
  int64_t num_steps() const noexcept { return num_steps_; }
  const DType& dtype() const noexcept { return dtype_; }
  std::span<const int64_t> step_shape() const noexcept;
  uint64_t episode_id() const noexcept { return episode_id_; }
  Compression compression() const noexcept { return compression_; }
  bool delta_encoded() const noexcept { return delta_encoded_; }
  int64_t start_step() const noexcept { return start_step_; }
  int64_t end_step() const noexcept { return end_step_; }
  // Bytes of the raw, stacked cells (the payload's size unless compressed).
  int64_t uncompressed_size() const noexcept;
  const std::byte* data() const noexcept { return storage_ + rank_ * sizeof(int64_t); }
  size_t data_size() const noexcept { return data_size_; }
  // Bytes this chunk holds in memory: payload plus a fixed estimate of its
  // bookkeeping, used for the memory figures in table and store info.
  int64_t memory_bytes() const noexcept;

  // True when both chunks describe the same data (metadata and payload).
  bool SameContentAs(const Chunk& other) const noexcept;

 protected:
  // Copies the step shape and `payload` into `storage`, which must hold
  // StorageBytes(metadata, payload.size()) bytes aligned for int64_t and
  // outlive the chunk. `metadata` must have passed Validate().
  Chunk(const ChunkMetadata& metadata, std::span<const std::byte> payload, std::byte* storage,
        PayloadCopy copy) noexcept;

 private:
  uint64_t key_;
  uint64_t episode_id_;
  int64_t num_steps_;
  int64_t start_step_;
  int64_t end_step_;
  size_t data_size_;
  // The step shape (rank_ dimensions), then the payload.
  std::byte* storage_;
  DType dtype_;
  uint16_t rank_;
  Compression compression_;
  bool delta_encoded_;
};

}  // namespace resound

#endif  // RESOUND_CHUNK_H_

// The service's shared messages (protos/resound/v1/replay.proto) in C++: their
// field numbers, and ChunkBatch and Trajectories written and read without the
// protobuf runtime. InsertRequestEncoder and sample_response.h build on these;
// tests/core/test_wire_encoding.py checks that the protobuf runtime reads what is
// written here and that what it writes reads back.
#ifndef RESOUND_WIRE_MESSAGES_H_
#define RESOUND_WIRE_MESSAGES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "resound/chunk.h"
#include "resound/chunk_store.h"
#include "resound/packed_trajectories.h"
#include "resound/proto_reader.h"
#include "resound/proto_writer.h"
#include "resound/shareable_blocks.h"

namespace resound::wire {

// Field numbers of protos/resound/v1/replay.proto.
namespace chunk_layout {
constexpr uint32_t kDtype = 1, kShape = 2, kCompression = 3, kDeltaEncoded = 4;
}
namespace chunk_batch {
constexpr uint32_t kLayouts = 1, kKeys = 2, kLayoutIndices = 3, kNumSteps = 4, kEpisodeIds = 5, kStartSteps = 6,
                   kEndSteps = 7, kDataSizes = 8;
}
namespace trajectories {
constexpr uint32_t kNumColumns = 1, kNumSlices = 2, kSqueeze = 3, kChunkKeys = 4, kOffsets = 5, kLengths = 6;
}
namespace item_batch {
constexpr uint32_t kTables = 1, kTableIndices = 2, kKeys = 3, kPriorities = 4, kTrajectories = 5;
}
namespace insert_request {
constexpr uint32_t kChunks = 1, kItems = 2, kReleaseChunkKeys = 3, kChunkData = 4;
}
namespace insert_response {
constexpr uint32_t kItemKeys = 1;
}
namespace sample_request {
constexpr uint32_t kTable = 1, kNumSamples = 2, kTimeoutSeconds = 3, kMaxPerResponse = 4;
}
namespace mutate_priorities_request {
constexpr uint32_t kTable = 1, kUpdateKeys = 2, kUpdatePriorities = 3, kDeleteKeys = 4;
}
namespace mutate_priorities_response {
constexpr uint32_t kNumUpdated = 1, kNumDeleted = 2;
}
namespace sampled_items {
constexpr uint32_t kKeys = 1, kPriorities = 2, kTimesSampled = 3, kProbabilities = 4, kTableSizes = 5,
                   kRateLimited = 6, kTrajectories = 7;
}
namespace sample_response {
constexpr uint32_t kChunks = 1, kItems = 2, kChunkData = 3, kEndOfRequest = 4, kTimedOut = 5,
                   kTimeoutReason = 6;
}

// A ChunkBatch as read: the layouts as metadata templates (key and steps
// unset) and the per-chunk arrays, which need not agree yet (AddChunkBatch
// checks them).
struct ChunkBatchMessage {
  std::vector<ChunkMetadata> layouts;
  std::vector<uint64_t> keys;
  std::vector<uint32_t> layout_indices;
  std::vector<int64_t> num_steps;
  std::vector<uint64_t> episode_ids;
  std::vector<int64_t> start_steps;
  std::vector<int64_t> end_steps;
  std::vector<int64_t> data_sizes;
};

// Appends one entry of a ChunkBatch's `layouts` to `batch`.
void WriteChunkLayout(ProtoWriter& batch, const DType& dtype, std::span<const int64_t> step_shape,
                      Compression compression, bool delta_encoded);
// Writes field `field` of `out`: a ChunkBatch describing `chunks` (their
// payloads go separately, in the enclosing message's chunk_data).
void WriteChunkBatch(ProtoWriter& out, uint32_t field, const std::vector<const Chunk*>& chunks);
// Writes field `field` of `out`: a Trajectories message.
void WriteTrajectories(ProtoWriter& out, uint32_t field, const PackedTrajectories& packed);

// Finishes `message` with bytes field `field` holding the payloads of
// `chunks` back to back (omitted when they are empty), written into the
// buffer `allocate(size)` returns: the payloads are copied once, straight
// from the chunks, into the caller's buffer.
void WriteWithPayloads(ProtoWriter& message, uint32_t field, const std::vector<const Chunk*>& chunks,
                       const std::function<char*(size_t)>& allocate);

// The same-host transport's layout of it (local::Frame::kDataTail): the size
// of `message` as a u64, `message` itself (without the payloads' field),
// then the payloads back to back, which the receiver copies straight into
// its chunk store instead of copying the whole request first.
//
// With an `arena` (local::Frame::kArenaRefs), the data starts with a table
// of one u64 per chunk: where in the arena its payload is, or
// kPayloadInData for one that follows (a chunk outside the arena).
// Returns the positions in `chunks` of those whose payloads it named in the
// arena: they must not change until the receiver has copied them.
inline constexpr uint64_t kPayloadInData = ~uint64_t{0};
std::vector<size_t> WriteWithDataTail(const ProtoWriter& message, const std::vector<const Chunk*>& chunks,
                                      const std::function<char*(size_t)>& allocate,
                                      const PayloadBlockSource* arena = nullptr);

// Where the payloads of the chunks `keys`, of `data_sizes` bytes, lie, read
// off a data tail with arena refs (see WriteWithDataTail) and the client's
// `arena`. InvalidArgumentError for a table or payload that does not fit,
// and for payloads of more than `max_bytes` together (what one request may
// bring: without the bound, a small table naming a large range many times
// would have the server copy without end).
std::vector<std::span<const std::byte>> PayloadsWithArenaRefs(const std::vector<uint64_t>& keys,
                                                              const std::vector<int64_t>& data_sizes,
                                                              std::span<const std::byte> data,
                                                              std::span<const std::byte> arena, uint64_t max_bytes);

// The ChunkBatch or Trajectories `reader` holds. InvalidArgumentError names
// the malformed field.
ChunkBatchMessage ReadChunkBatch(ProtoReader reader);
PackedTrajectories ReadTrajectories(ProtoReader reader);

// The item keys a serialized InsertResponse confirms, in order.
// InvalidArgumentError if it is malformed.
std::vector<uint64_t> ReadInsertResponseKeys(std::span<const uint8_t> message);

// Makes the chunks `batch` describes, one payload each in `payloads`, in
// `store`, and returns handles to them (the caller holds them: the store
// does not). InvalidArgumentError names the first bad chunk.
std::vector<std::shared_ptr<const Chunk>> MakeChunks(const ChunkBatchMessage& batch,
                                                     std::span<const std::span<const std::byte>> payloads,
                                                     ChunkStore& store);
// The same, their payloads back to back in `payloads`.
std::vector<std::shared_ptr<const Chunk>> MakeChunks(const ChunkBatchMessage& batch,
                                                     std::span<const std::byte> payloads, ChunkStore& store);

}  // namespace resound::wire

#endif  // RESOUND_WIRE_MESSAGES_H_

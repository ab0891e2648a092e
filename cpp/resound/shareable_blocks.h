// Where a client's large chunk payloads are allocated, so that a server on
// the same host can read them where they are.
//
// A remote writer's chunk is built once in the client and then copied, over
// the same-host transport, into the connection's upload region, from which
// the server copies it again into its own store. For a 400 KB step those
// copies are most of the writer's time. A chunk whose memory the server can
// map already (a PayloadBlockSource: the same-host transport's payload
// arena) needs no copy into the region: the insert message names where the
// payload is, and the server copies it once, straight into its store.
//
// The core knows nothing of shared memory: a transport installs its source
// once, and stores made with shareable payloads (ChunkStore's option, the
// client's) take their large chunks' blocks from it, while there is room.
// Every other block comes from BlockRecycler, as a table's chunks do.
#ifndef RESOUND_SHAREABLE_BLOCKS_H_
#define RESOUND_SHAREABLE_BLOCKS_H_

#include <cstddef>
#include <cstdint>
#include <optional>

namespace resound {

// Memory another process can read: blocks handed out and taken back.
// Thread-safe.
class PayloadBlockSource {
 public:
  virtual ~PayloadBlockSource() = default;
  // A block of `bytes` (aligned to 64 bytes), or nullptr if there is no room.
  virtual void* Allocate(size_t bytes) noexcept = 0;
  // Takes back a block of Allocate(bytes).
  virtual void Free(void* block, size_t bytes) noexcept = 0;
  // Whether `block` lies in this source's memory (allocated here or not).
  virtual bool Owns(const void* block) const noexcept = 0;
  // Where [data, data + bytes) lies in this source's memory, as an offset
  // from its start; nullopt unless it lies wholly inside.
  virtual std::optional<uint64_t> OffsetOf(const void* data, size_t bytes) const noexcept = 0;
};

// The TrailingAllocator block policy (see trailing_allocator.h) of chunks
// in a store with shareable payloads: blocks of at least kMinSharedBytes
// from the installed source while it has room, all others from
// BlockRecycler. The block's size travels in a header in front of it, as
// with RecycledBlocks.
struct ShareableBlocks {
  static constexpr size_t kHeader = sizeof(size_t);
  static constexpr size_t kAlignment = kHeader;
  // Below this a copy into the upload region costs less than the source's
  // bookkeeping.
  static constexpr size_t kMinSharedBytes = 64 * 1024;

  // Makes `source` the process's source for the rest of its life (it must
  // never be destroyed; stores already made use it too), unless one was
  // installed before: returns whether this one was.
  static bool Install(PayloadBlockSource& source) noexcept;
  // The installed source, or nullptr.
  static PayloadBlockSource* Installed() noexcept;

  static void* Allocate(size_t bytes);
  static void Deallocate(void* data) noexcept;
};

}  // namespace resound

#endif  // RESOUND_SHAREABLE_BLOCKS_H_

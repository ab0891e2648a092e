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
// client's) take their large chunks' payload blocks from it, while there is
// room. Only the payload (and the step shape before it): the chunk object and
// its reference counts stay in the process's own memory.
#ifndef RESOUND_SHAREABLE_BLOCKS_H_
#define RESOUND_SHAREABLE_BLOCKS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

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
  // Where [data, data + bytes) lies in this source's memory, as an offset
  // from its start; nullopt unless it lies wholly inside.
  virtual std::optional<uint64_t> OffsetOf(const void* data, size_t bytes) const noexcept = 0;
};

// The process's source of shareable blocks, and the size from which a
// store with shareable payloads takes its chunks' blocks from it.
class ShareableBlocks {
 public:
  // Below this a copy into the upload region costs less than the source's
  // bookkeeping.
  static constexpr size_t kMinSharedBytes = 64 * 1024;

  ShareableBlocks() = delete;

  // Makes `source` the process's source for the rest of its life (it must
  // never be destroyed), unless one was installed before: returns whether
  // this one was.
  static bool Install(PayloadBlockSource& source) noexcept;
  // The installed source, or nullptr.
  static PayloadBlockSource* Installed() noexcept;
};

// One block of the installed source, given back when this is destroyed.
class SharedBlock {
 public:
  // A block of `bytes` from the installed source; an empty one (false) if
  // none is installed or it has no room.
  static SharedBlock Allocate(size_t bytes) noexcept;

  SharedBlock() noexcept = default;
  SharedBlock(SharedBlock&& other) noexcept;
  SharedBlock& operator=(SharedBlock&& other) noexcept;
  SharedBlock(const SharedBlock&) = delete;
  SharedBlock& operator=(const SharedBlock&) = delete;
  ~SharedBlock();

  void* data() const noexcept { return data_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }

 private:
  SharedBlock(PayloadBlockSource* source, void* data, size_t bytes) noexcept
      : source_(source), data_(data), bytes_(bytes) {}
  void Release() noexcept;

  PayloadBlockSource* source_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace resound

#endif  // RESOUND_SHAREABLE_BLOCKS_H_

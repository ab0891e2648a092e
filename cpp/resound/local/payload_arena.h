// The memory a same-host client's writers build their large chunks in, which
// the servers it writes to map for reading (docs/local-transport.md):
// a PayloadBlockSource (see resound/shareable_blocks.h) over one sealed
// memfd per process.
//
// An insert over the same-host transport then names where each such chunk's
// payload lies (an offset into the arena) instead of copying it into the
// connection's upload region, and the server copies it from there, once,
// into its own store: a 400 KB step is copied twice (the writer's append,
// the server's adoption) instead of three times.
//
// What the server may rely on, and what not: the arena is sealed against
// shrinking and growing, so an offset the server checked against its size
// stays mapped; its bytes stay writable by the client, so the server copies
// a payload before anything reads it, as it does the upload region's. A
// chunk's block is reused only after its last handle is gone, and the
// client holds the handles of a message's chunks until the server answered
// it (LocalClient::HoldUntilAnswered), so a payload does not change while
// the server copies it.
//
// A server maps the arena only if it runs as the client's own user
// (LocalClient::AttachArena checks the socket's peer): every chunk this
// process builds is readable there, whichever server it is meant for, and
// a process of the same user is already trusted with this one's memory.
// After fork() the child's arena hands out nothing (the parent's blocks
// share the same memory; see MadeHere).
#ifndef RESOUND_LOCAL_PAYLOAD_ARENA_H_
#define RESOUND_LOCAL_PAYLOAD_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "resound/local/shared_memory.h"
#include "resound/shareable_blocks.h"

namespace resound::local {

class PayloadArena final : public PayloadBlockSource {
 public:
  // Blocks are handed out in multiples of this (a cache line).
  static constexpr size_t kGranularity = 64;
  // Free memory past the last block that stays written (resident) for the
  // next blocks: once more than twice this is, the rest goes back to the
  // system. (Free blocks below a live one stay resident.)
  static constexpr size_t kKeptFreeBytes = size_t{32} << 20;

  // The process's arena of `bytes` (address space: pages cost memory only
  // once written), made and installed as ShareableBlocks' source by the
  // first call; later calls return it whatever their `bytes`. nullptr if
  // another source was installed first or the memory could not be made.
  static PayloadArena* Process(size_t bytes);
  // The process's arena if one was made, without making one.
  static PayloadArena* Existing();

  explicit PayloadArena(size_t bytes);
  PayloadArena(const PayloadArena&) = delete;
  PayloadArena& operator=(const PayloadArena&) = delete;

  void* Allocate(size_t bytes) noexcept override;
  void Free(void* block, size_t bytes) noexcept override;
  // Whether `block` lies in the arena's memory (handed out or not).
  bool Owns(const void* block) const noexcept;
  std::optional<uint64_t> OffsetOf(const void* data, size_t bytes) const noexcept override;

  int fd() const noexcept { return memory_.fd(); }
  size_t size() const noexcept { return memory_.size(); }
  // Bytes handed out and not yet taken back.
  size_t bytes_in_use() const;
  // Bytes up to which the arena's pages may be written (resident).
  size_t resident_bytes() const;
  // Whether this process made the arena: false in a child that inherited
  // it, whose parent reuses its blocks (a child hands out, takes back and
  // names none; its inherited chunks' payloads may change under it, so a
  // child must not use writers from before the fork).
  bool MadeHere() const noexcept;

 private:
  // Gives the pages of [from, resident_end_) back if that free tail is more
  // than twice kKeptFreeBytes, keeping kKeptFreeBytes. With mu_ held.
  void TrimTailLocked(size_t from) noexcept;

  SharedMemory memory_;
  const size_t end_;  // the size, rounded down to kGranularity: where blocks end
  mutable std::mutex mu_;
  std::map<size_t, size_t> free_;  // offset -> bytes, disjoint, neighbours merged
  size_t in_use_ = 0;
  size_t resident_end_ = 0;  // the end of the last block handed out since the last trim, or more
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_PAYLOAD_ARENA_H_

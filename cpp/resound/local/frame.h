// The unit of the local transport's protocol (docs/local-transport.md): one
// SOCK_SEQPACKET message, a fixed 40-byte header followed by an inline
// payload of at most kMaxInlineBytes, or a payload in the sender's shared
// memory region that the header points at; or a header alone, rung
// through shared memory (Doorbell).
//
// Every field comes from another process: Decode checks the magic, version,
// kind and lengths, and the receiver checks offsets against its region
// (Doorbell::PayloadView), before anything else reads the frame.
#ifndef RESOUND_LOCAL_FRAME_H_
#define RESOUND_LOCAL_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace resound::local {

struct Frame {
  static constexpr uint32_t kMagic = 0x464c5352;  // "RSLF"
  // 2: kDataTail; 3: Doorbell's control pages, kWake; 4: packed mutate; 5: kArena, kArenaRefs;
  // 6: step inserts; 7: kNextLater
  static constexpr uint16_t kVersion = 7;
  static constexpr size_t kHeaderBytes = 40;
  // Larger payloads go through shared memory (a socket buffer holds ~200 KB).
  static constexpr size_t kMaxInlineBytes = 64 * 1024;

  enum Kind : uint16_t {
    kHello = 1,     // client -> server: its upload region (fd), asks to be let in
    kWelcome = 2,   // server -> client: the server's download region (fd), token
    kRequest = 3,   // client -> server: one call of `method`
    kResponse = 4,  // server -> client: the call's answer (kLast on the final one)
    kError = 5,     // server -> client: the call failed; payload u32 code, text
    kRegion = 6,    // client -> server: a larger upload region (fd) for larger requests
    kWake = 7,      // either way: a frame was rung while the receiver slept (see Doorbell)
    kArena = 8,     // client -> server: the client's payload arena (fd) to map for reading
  };
  enum Flags : uint32_t {
    kInShared = 1,  // the payload is [offset, offset + length) of the sender's region's payload area
    kLast = 2,      // the last response to the request
    // A request whose payload is a u64 n, n bytes of message, then data
    // bytes (chunk payloads) the server copies out as they are and reads
    // nothing else from: only the message is copied before it is read, the
    // data goes once, straight to where it is kept.
    kDataTail = 4,
    // A response that carries (as its descriptor) the server's new, larger
    // download region, in place of the old one; its payload is in the new
    // one. Sent when one sampled item is larger than the region was.
    kNewRegion = 8,
    // With kDataTail: the data starts with a table saying where each of the
    // message's chunks' payloads is, in the data that follows or in the
    // client's payload arena (wire::WriteWithDataTail).
    kArenaRefs = 16,
    // A request its client sent between items it makes (a writer's batch,
    // sent ahead): its next request is a batch away, so the server's thread
    // sleeps after answering instead of looking for it (see SpinBudget).
    kNextLater = 32,
  };

  uint16_t kind = 0;
  uint32_t method = 0;
  uint32_t flags = 0;
  uint64_t request_id = 0;
  uint64_t offset = 0;  // with kInShared
  uint64_t length = 0;  // payload bytes (inline: those after the header)

  bool in_shared() const noexcept { return (flags & kInShared) != 0; }
  bool last() const noexcept { return (flags & kLast) != 0; }
  bool data_tail() const noexcept { return (flags & kDataTail) != 0; }
  bool new_region() const noexcept { return (flags & kNewRegion) != 0; }
  bool arena_refs() const noexcept { return (flags & kArenaRefs) != 0; }
  bool next_later() const noexcept { return (flags & kNextLater) != 0; }

  // Writes the header into out[0, kHeaderBytes).
  void Encode(std::span<std::byte, kHeaderBytes> out) const noexcept;
  // Reads a received message's header; InvalidArgumentError naming the
  // problem (short message, magic, version, kind, an inline length that does
  // not match the bytes that came, an inline payload above the limit).
  static Frame Decode(std::span<const std::byte> message);
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_FRAME_H_

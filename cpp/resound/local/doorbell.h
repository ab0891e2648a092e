// Frames passed through shared memory instead of the socket: a round trip
// of the local transport without a system call when both sides are awake.
//
// Each of a connection's two regions starts with a control page that only
// the region's writer writes: the count of frames it has rung so far, the
// last one's 40-byte header, and whether the writer sleeps. A side rings by
// writing a header and then the new count; the other side looks for a count
// one past the last it took. A frame that carries a descriptor (a region, a
// batch region), an inline payload, or an error still goes over the socket,
// and the receiver takes frames from both.
//
// A side that looks in vain for a while sleeps in poll() on the socket.
// Before it does, it says so in its control page and looks once more; the
// ringing side writes its count and then reads that flag, each with a full
// fence between, so at least one of the two sees the other's write (as in
// Dekker's algorithm): either the sleeper finds the frame, or the ringer
// sends a wake frame over the socket. A wake may come for a frame that was
// already taken; the receiver drops wakes wherever it reads the socket.
//
// The peer's control page is the peer's to write at any time: a header is
// copied before it is decoded and checked, and a count other than the last
// one taken or the next is a broken peer (InvalidArgumentError).
//
// Example (one side; the other is the same with its own regions):
//   Doorbell bell;
//   bell.Attach(own_region);   // stamps the count rung so far
//   bell.Listen(peer_region);
//   if (bell.Ring(frame)) bell.SendWake(socket);
//   const Doorbell::Arrival next = bell.Wait(socket, spin, deadline, stop_fd);
//   if (next.rung) Handle(*next.rung); else ReadTheSocket();
#ifndef RESOUND_LOCAL_DOORBELL_H_
#define RESOUND_LOCAL_DOORBELL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "resound/deadline.h"
#include "resound/local/frame.h"
#include "resound/local/local_socket.h"
#include "resound/local/shared_memory.h"

namespace resound::local {

class Doorbell {
 public:
  // The control page at the start of every region: payloads, and the
  // offsets frames give, start after it (it keeps them page-aligned).
  static constexpr size_t kControlBytes = 4096;

  // A region's payload area (after its control page), and [offset, offset +
  // length) of it; InvalidArgumentError if that does not lie inside.
  static std::byte* Payload(SharedMemory& region) noexcept { return region.data() + kControlBytes; }
  static size_t PayloadBytes(const SharedMemory& region) noexcept {
    return region.size() > kControlBytes ? region.size() - kControlBytes : 0;
  }
  static std::span<const std::byte> PayloadView(const SharedMemory& region, uint64_t offset, uint64_t length);

  // The region this side rings in (a new one, or a larger one in place of
  // the old): its count is stamped with the frames rung so far, so that the
  // peer, once it listens to it, sees no frame that was not rung.
  void Attach(SharedMemory& own) noexcept;
  // The peer's region (a new one, or one in place of the old).
  void Listen(const SharedMemory& peer) noexcept { peer_ = peer.data(); }

  // Puts `frame` where the peer looks (its payload, if any, already in this
  // side's region); true if the peer sleeps, and needs a wake frame.
  bool Ring(const Frame& frame) noexcept;
  // Sends a wake frame (after a Ring that returned true).
  void SendWake(const LocalSocket& socket);
  uint64_t wakes_sent() const noexcept { return wakes_sent_; }
  // Whether the peer says it sleeps (waits on the socket) now.
  bool PeerSleeps() const noexcept;
  // The peer's next rung frame, if there is one.
  std::optional<Frame> Take();

  struct Arrival {
    LocalSocket::Wait wait = LocalSocket::Wait::kReadable;
    std::optional<Frame> rung;  // else, with kReadable, the socket has a message (or the hang-up)
  };
  // Looks for a rung frame or a readable socket for up to `spin` without
  // sleeping (yielding the core now and then), then sleeps on the socket
  // until `deadline` or `stop_fd` (if >= 0) is readable. No spin and a
  // deadline that has passed: one look (kTimedOut if nothing is there).
  Arrival Wait(const LocalSocket& socket, std::chrono::nanoseconds spin, const Deadline& deadline,
               int stop_fd = -1);

 private:
  void SetSleeping(bool sleeping) noexcept;
  // Clears the sleeping flag when it goes.
  class Awake {
   public:
    explicit Awake(Doorbell& bell) noexcept : bell_(bell) {}
    Awake(const Awake&) = delete;
    Awake& operator=(const Awake&) = delete;
    ~Awake() { bell_.SetSleeping(false); }

   private:
    Doorbell& bell_;
  };

  std::byte* own_ = nullptr;
  const std::byte* peer_ = nullptr;
  uint64_t rung_ = 0;   // frames this side rang
  uint64_t taken_ = 0;  // frames of the peer's this side took
  uint64_t wakes_sent_ = 0;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_DOORBELL_H_

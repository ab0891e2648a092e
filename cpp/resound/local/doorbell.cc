#include "resound/local/doorbell.h"

#include <sched.h>

#include <array>
#include <atomic>
#include <cstring>
#include <string>

#include "resound/errors.h"

namespace resound::local {
namespace {

// The control page: the count and the header share the first cache line
// (a look that finds a new count has the header with it); the sleeping flag
// has a line of its own.
constexpr size_t kCountAt = 0;
constexpr size_t kHeaderAt = 8;
constexpr size_t kSleepingAt = 64;
static_assert(kHeaderAt + Frame::kHeaderBytes <= kSleepingAt);

// Between looks at the socket (a system call, ~0.3 us) a spinning side
// looks at the peer's count this many times, pausing the core between.
constexpr unsigned kLooksPerSocketCheck = 32;

// The words are shared with another process through the mapping: atomic
// through std::atomic_ref. The peer's page may be mapped read-only; a load
// does not write it.
std::atomic_ref<uint64_t> Word64(const std::byte* page, size_t at) noexcept {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<std::byte*>(page) + at));
}
std::atomic_ref<uint32_t> Word32(const std::byte* page, size_t at) noexcept {
  return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(const_cast<std::byte*>(page) + at));
}

void CpuRelax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

std::span<const std::byte> Doorbell::PayloadView(const SharedMemory& region, uint64_t offset, uint64_t length) {
  const size_t payload_bytes = PayloadBytes(region);
  if (offset > payload_bytes || length > payload_bytes - offset) {
    throw InvalidArgumentError("local frame: [" + std::to_string(offset) + ", +" + std::to_string(length) +
                               ") lies outside the region's " + std::to_string(payload_bytes) + " payload bytes");
  }
  return {region.data() + kControlBytes + offset, static_cast<size_t>(length)};
}

void Doorbell::Attach(SharedMemory& own) noexcept {
  own_ = own.data();
  Word64(own_, kCountAt).store(rung_, std::memory_order_release);
}

bool Doorbell::Ring(const Frame& frame) noexcept {
  frame.Encode(std::span<std::byte, Frame::kHeaderBytes>(own_ + kHeaderAt, Frame::kHeaderBytes));
  // Release: the header (and the payload written before it) is there for
  // the peer that sees the count.
  Word64(own_, kCountAt).store(++rung_, std::memory_order_release);
  // The ringer's half of the Dekker pair (see SetSleeping): the count is
  // visible before the flag is read.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return PeerSleeps();
}

bool Doorbell::PeerSleeps() const noexcept {
  return Word32(peer_, kSleepingAt).load(std::memory_order_relaxed) != 0;
}

void Doorbell::SendWake(const LocalSocket& socket) {
  Frame frame;
  frame.kind = Frame::kWake;
  std::array<std::byte, Frame::kHeaderBytes> header{};
  frame.Encode(header);
  const std::span<const std::byte> parts[] = {header};
  socket.Send(parts);
  ++wakes_sent_;
}

std::optional<Frame> Doorbell::Take() {
  const uint64_t count = Word64(peer_, kCountAt).load(std::memory_order_acquire);
  if (count == taken_) return std::nullopt;
  if (count != taken_ + 1) {
    throw InvalidArgumentError("local connection: the peer's doorbell count went from " + std::to_string(taken_) +
                               " to " + std::to_string(count));
  }
  // Copied first: the peer may write its page at any time.
  std::array<std::byte, Frame::kHeaderBytes> header;
  std::memcpy(header.data(), peer_ + kHeaderAt, header.size());
  ++taken_;
  return Frame::Decode(header);
}

void Doorbell::SetSleeping(bool sleeping) noexcept {
  Word32(own_, kSleepingAt).store(sleeping ? 1 : 0, std::memory_order_relaxed);
  // The sleeper's half: the flag is visible before the count is read again.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

Doorbell::Arrival Doorbell::Wait(const LocalSocket& socket, std::chrono::nanoseconds spin, const Deadline& deadline,
                                 int stop_fd) {
  if (spin.count() == 0 && deadline.has_passed()) {
    // One look, no wait (a writer looking for an answer between items): no
    // sleeping flag, which would have the peer send a wake frame for an
    // answer this side reads without one.
    if (std::optional<Frame> frame = Take()) return {LocalSocket::Wait::kReadable, frame};
    return {socket.ReadableNow() ? LocalSocket::Wait::kReadable : LocalSocket::Wait::kTimedOut, std::nullopt};
  }
  const auto until = std::chrono::steady_clock::now() + spin;
  for (unsigned look = 1;; ++look) {
    if (std::optional<Frame> frame = Take()) return {LocalSocket::Wait::kReadable, frame};
    if (look % kLooksPerSocketCheck != 0) {
      CpuRelax();
      continue;
    }
    if (socket.ReadableNow()) return {};
    if (std::chrono::steady_clock::now() >= until) break;
    // The peer may need this core (two processes on a machine of few cores).
    ::sched_yield();
  }
  SetSleeping(true);
  const Awake awake_after(*this);  // the flag is cleared on every way out
  if (std::optional<Frame> frame = Take()) return {LocalSocket::Wait::kReadable, frame};
  // A frame rung while this side slept came with a wake: the caller reads
  // that, drops it and waits again, which takes the frame.
  return {socket.WaitReadable(deadline, stop_fd), std::nullopt};
}

}  // namespace resound::local

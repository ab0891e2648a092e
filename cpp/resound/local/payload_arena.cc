#include "resound/local/payload_arena.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <memory>

namespace resound::local {

namespace {

std::mutex making;
bool tried = false;  // under `making`
// Never destroyed: chunks built in it may be freed during the process's
// exit, after static destructors ran (a deliberate, one-off leak). Read
// without the lock (a child forked while another thread made it must not
// wait for that lock).
std::atomic<PayloadArena*> process_arena{nullptr};
// False in a child forked after any arena was made (pthread_atfork): its
// arenas are its parent's.
std::atomic<bool> made_here{true};

void ForkedChild() noexcept { made_here.store(false, std::memory_order_relaxed); }

// `bytes` rounded up to whole blocks of kGranularity.
size_t Rounded(size_t bytes) noexcept {
  return (bytes + PayloadArena::kGranularity - 1) / PayloadArena::kGranularity * PayloadArena::kGranularity;
}

}  // namespace

PayloadArena* PayloadArena::Process(size_t bytes) {
  if (PayloadArena* arena = process_arena.load(std::memory_order_acquire)) return arena;
  std::lock_guard<std::mutex> lock(making);
  if (!tried && bytes > 0) {
    tried = true;
    try {
      auto made = std::make_unique<PayloadArena>(bytes);
      if (ShareableBlocks::Install(*made)) process_arena.store(made.release(), std::memory_order_release);
    } catch (const std::exception&) {
      // No memfd (or no room for its mapping): writers copy as before.
    }
  }
  return process_arena.load(std::memory_order_acquire);
}

PayloadArena* PayloadArena::Existing() { return process_arena.load(std::memory_order_acquire); }

PayloadArena::PayloadArena(size_t bytes)
    : memory_(SharedMemory::Create("resound-payload-arena", bytes, false)),
      end_(memory_.size() / kGranularity * kGranularity) {
  static std::once_flag registered;
  std::call_once(registered, [] { ::pthread_atfork(nullptr, nullptr, ForkedChild); });
  if (end_ > 0) free_.emplace(0, end_);
}

bool PayloadArena::MadeHere() const noexcept { return made_here.load(std::memory_order_relaxed); }

void* PayloadArena::Allocate(size_t bytes) noexcept {
  if (bytes == 0 || bytes > end_ || !MadeHere()) return nullptr;
  const size_t rounded = Rounded(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  // First fit: blocks are reused from the start of the arena, which keeps
  // the pages written (the resident part) near what is in use.
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < rounded) continue;
    const size_t offset = it->first;
    const size_t left = it->second - rounded;
    free_.erase(it);
    if (left > 0) free_.emplace(offset + rounded, left);
    in_use_ += rounded;
    resident_end_ = std::max(resident_end_, offset + rounded);
    return memory_.data() + offset;
  }
  return nullptr;
}

void PayloadArena::Free(void* block, size_t bytes) noexcept {
  // A child's inherited blocks are its parent's to reuse, not its own.
  if (!MadeHere()) return;
  const size_t rounded = Rounded(bytes);
  size_t offset = static_cast<size_t>(static_cast<std::byte*>(block) - memory_.data());
  size_t length = rounded;
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= rounded;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + length == next->first) {
    length += next->second;
    next = free_.erase(next);
  }
  const auto previous = next == free_.begin() ? free_.end() : std::prev(next);
  if (previous != free_.end() && previous->first + previous->second == offset) {
    previous->second += length;
    offset = previous->first;
    length = previous->second;
  } else {
    free_.emplace_hint(next, offset, length);
  }
  if (offset + length == end_) TrimTailLocked(offset);
}

void PayloadArena::TrimTailLocked(size_t from) noexcept {
  if (resident_end_ <= from || resident_end_ - from <= 2 * kKeptFreeBytes) return;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t keep_until = (from + kKeptFreeBytes + page - 1) / page * page;
  // Its pages go back to the system (a memfd's pages are freed by punching
  // them out; the size stays, sealed); they read as zeros if used again.
  if (::fallocate(memory_.fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(keep_until),
                  static_cast<off_t>(resident_end_ - keep_until)) == 0) {
    resident_end_ = keep_until;
  }
}

bool PayloadArena::Owns(const void* block) const noexcept {
  const auto* at = static_cast<const std::byte*>(block);
  return at >= memory_.data() && at < memory_.data() + memory_.size();
}

std::optional<uint64_t> PayloadArena::OffsetOf(const void* data, size_t bytes) const noexcept {
  if (!Owns(data) || !MadeHere()) return std::nullopt;
  const auto offset = static_cast<size_t>(static_cast<const std::byte*>(data) - memory_.data());
  if (bytes > memory_.size() - offset) return std::nullopt;
  return offset;
}

size_t PayloadArena::resident_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resident_end_;
}

size_t PayloadArena::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

}  // namespace resound::local

#include "resound/local/payload_arena.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include <iterator>
#include <memory>

namespace resound::local {

namespace {

std::mutex making;
// Never destroyed: chunks built in it may be freed during the process's
// exit, after static destructors ran (a deliberate, one-off leak).
PayloadArena* process_arena = nullptr;
bool tried = false;

}  // namespace

PayloadArena* PayloadArena::Process(size_t bytes) {
  std::lock_guard<std::mutex> lock(making);
  if (!tried && bytes > 0) {
    tried = true;
    try {
      auto made = std::make_unique<PayloadArena>(bytes);
      if (ShareableBlocks::Install(*made)) process_arena = made.release();
    } catch (const std::exception&) {
      // No memfd (or no room for its mapping): writers copy as before.
    }
  }
  return process_arena;
}

PayloadArena* PayloadArena::Existing() {
  std::lock_guard<std::mutex> lock(making);
  return process_arena;
}

PayloadArena::PayloadArena(size_t bytes)
    : memory_(SharedMemory::Create("resound-payload-arena", bytes, false)), owner_(::getpid()) {
  free_.emplace(0, memory_.size() / kGranularity * kGranularity);
}

bool PayloadArena::MadeHere() const noexcept { return ::getpid() == owner_; }

void* PayloadArena::Allocate(size_t bytes) noexcept {
  if (bytes == 0 || bytes > memory_.size() || !MadeHere()) return nullptr;
  const size_t rounded = (bytes + kGranularity - 1) / kGranularity * kGranularity;
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
  const size_t rounded = (bytes + kGranularity - 1) / kGranularity * kGranularity;
  size_t offset = static_cast<size_t>(static_cast<std::byte*>(block) - memory_.data());
  size_t length = rounded;
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= rounded;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + length == next->first) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    const auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      previous->second += length;
      offset = previous->first;
      length = previous->second;
      if (offset + length == memory_.size()) TrimTailLocked(offset);
      return;
    }
  }
  free_.emplace_hint(next, offset, length);
  if (offset + length == memory_.size()) TrimTailLocked(offset);
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
  if (!Owns(data)) return std::nullopt;
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

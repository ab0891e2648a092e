#include "resound/local/frame.h"

#include <string>

#include "resound/errors.h"
#include "resound/local/fixed_fields.h"

namespace resound::local {
void Frame::Encode(std::span<std::byte, kHeaderBytes> out) const noexcept {
  std::byte* p = out.data();
  PutField<uint32_t>(p, 0, kMagic);
  PutField<uint16_t>(p, 4, kVersion);
  PutField<uint16_t>(p, 6, kind);
  PutField<uint32_t>(p, 8, method);
  PutField<uint32_t>(p, 12, flags);
  PutField<uint64_t>(p, 16, request_id);
  PutField<uint64_t>(p, 24, offset);
  PutField<uint64_t>(p, 32, length);
}

Frame Frame::Decode(std::span<const std::byte> message) {
  if (message.size() < kHeaderBytes) {
    throw InvalidArgumentError("local frame: " + std::to_string(message.size()) + " bytes, below the header's " +
                               std::to_string(kHeaderBytes));
  }
  const std::byte* p = message.data();
  if (GetField<uint32_t>(p, 0) != kMagic) throw InvalidArgumentError("local frame: not a resound frame (magic)");
  const auto version = GetField<uint16_t>(p, 4);
  if (version != kVersion) {
    throw InvalidArgumentError("local frame: version " + std::to_string(version) + ", this side speaks " +
                               std::to_string(kVersion));
  }
  Frame frame;
  frame.kind = GetField<uint16_t>(p, 6);
  if (frame.kind < kHello || frame.kind > kArena) {
    throw InvalidArgumentError("local frame: unknown kind " + std::to_string(frame.kind));
  }
  frame.method = GetField<uint32_t>(p, 8);
  frame.flags = GetField<uint32_t>(p, 12);
  if ((frame.flags & ~static_cast<uint32_t>(kInShared | kLast | kDataTail | kNewRegion | kArenaRefs | kNextLater)) !=
      0) {
    throw InvalidArgumentError("local frame: unknown flags " + std::to_string(frame.flags));
  }
  frame.request_id = GetField<uint64_t>(p, 16);
  frame.offset = GetField<uint64_t>(p, 24);
  frame.length = GetField<uint64_t>(p, 32);
  const size_t inline_bytes = message.size() - kHeaderBytes;
  if (frame.in_shared()) {
    if (inline_bytes != 0) throw InvalidArgumentError("local frame: a shared payload with inline bytes too");
  } else {
    if (frame.length != inline_bytes) {
      throw InvalidArgumentError("local frame: says " + std::to_string(frame.length) + " payload bytes, " +
                                 std::to_string(inline_bytes) + " came");
    }
    if (inline_bytes > kMaxInlineBytes) {
      throw InvalidArgumentError("local frame: an inline payload of " + std::to_string(inline_bytes) +
                                 " bytes, above " + std::to_string(kMaxInlineBytes));
    }
  }
  return frame;
}

}  // namespace resound::local

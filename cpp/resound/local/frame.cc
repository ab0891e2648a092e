#include "resound/local/frame.h"

#include <cstring>
#include <string>

#include "resound/errors.h"

namespace resound::local {
namespace {

template <typename T>
void Put(std::byte* out, size_t at, T value) noexcept {
  std::memcpy(out + at, &value, sizeof value);  // little-endian hosts only (Linux x86-64, aarch64)
}

template <typename T>
T Get(const std::byte* in, size_t at) noexcept {
  T value;
  std::memcpy(&value, in + at, sizeof value);
  return value;
}

}  // namespace

void Frame::Encode(std::span<std::byte, kHeaderBytes> out) const noexcept {
  std::byte* p = out.data();
  Put<uint32_t>(p, 0, kMagic);
  Put<uint16_t>(p, 4, kVersion);
  Put<uint16_t>(p, 6, kind);
  Put<uint32_t>(p, 8, method);
  Put<uint32_t>(p, 12, flags);
  Put<uint64_t>(p, 16, request_id);
  Put<uint64_t>(p, 24, offset);
  Put<uint64_t>(p, 32, length);
}

Frame Frame::Decode(std::span<const std::byte> message) {
  if (message.size() < kHeaderBytes) {
    throw InvalidArgumentError("local frame: " + std::to_string(message.size()) + " bytes, below the header's " +
                               std::to_string(kHeaderBytes));
  }
  const std::byte* p = message.data();
  if (Get<uint32_t>(p, 0) != kMagic) throw InvalidArgumentError("local frame: not a resound frame (magic)");
  const auto version = Get<uint16_t>(p, 4);
  if (version != kVersion) {
    throw InvalidArgumentError("local frame: version " + std::to_string(version) + ", this side speaks " +
                               std::to_string(kVersion));
  }
  Frame frame;
  frame.kind = Get<uint16_t>(p, 6);
  if (frame.kind < kHello || frame.kind > kWake) {
    throw InvalidArgumentError("local frame: unknown kind " + std::to_string(frame.kind));
  }
  frame.method = Get<uint32_t>(p, 8);
  frame.flags = Get<uint32_t>(p, 12);
  if ((frame.flags & ~static_cast<uint32_t>(kInShared | kLast | kDataTail | kNewRegion)) != 0) {
    throw InvalidArgumentError("local frame: unknown flags " + std::to_string(frame.flags));
  }
  frame.request_id = Get<uint64_t>(p, 16);
  frame.offset = Get<uint64_t>(p, 24);
  frame.length = Get<uint64_t>(p, 32);
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

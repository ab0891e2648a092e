// Fixed-width fields of the same-host transport's frames and payloads, read
// and written at a byte offset. The protocol is little-endian and so are the
// hosts it runs on (Linux x86-64, aarch64): a field is the value's bytes.
// Copied, never cast in place: the bytes may be unaligned, and a peer's
// bytes are read once into a value before they are checked.
//
// Example:
//   std::byte header[8];
//   PutField<uint32_t>(header, 0, 7);
//   const uint32_t seven = GetField<uint32_t>(header, 0);
#ifndef RESOUND_LOCAL_FIXED_FIELDS_H_
#define RESOUND_LOCAL_FIXED_FIELDS_H_

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace resound::local {

template <typename T>
void PutField(std::byte* out, size_t at, T value) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  std::memcpy(out + at, &value, sizeof value);
}

template <typename T>
T GetField(const std::byte* in, size_t at) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  T value;
  std::memcpy(&value, in + at, sizeof value);
  return value;
}

}  // namespace resound::local

#endif  // RESOUND_LOCAL_FIXED_FIELDS_H_

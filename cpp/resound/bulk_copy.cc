#include "resound/bulk_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace resound {

void BulkCopy::Copy(void* dst, const void* src, size_t bytes) noexcept {
  if (bytes >= kStreamingBytes) {
    Stream(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

void BulkCopy::Stream(void* dst, const void* src, size_t bytes) noexcept {
#if defined(__x86_64__)
  auto* out = static_cast<std::byte*>(dst);
  const auto* in = static_cast<const std::byte*>(src);
  // Streaming stores need 16-byte aligned destinations: copy up to the next
  // 64-byte boundary (a whole line) the ordinary way.
  const size_t head = std::min(bytes, (64 - reinterpret_cast<uintptr_t>(out) % 64) % 64);
  std::memcpy(out, in, head);
  out += head;
  in += head;
  bytes -= head;
  // SSE2 is part of x86-64, so this needs no CPU check; four 16-byte stores
  // fill one line, which the CPU then writes out whole.
  auto* lines = reinterpret_cast<__m128i*>(out);
  const auto* from = reinterpret_cast<const __m128i*>(in);
  const size_t num_lines = bytes / 64;
  for (size_t i = 0; i < num_lines; ++i, lines += 4, from += 4) {
    const __m128i a = _mm_loadu_si128(from);
    const __m128i b = _mm_loadu_si128(from + 1);
    const __m128i c = _mm_loadu_si128(from + 2);
    const __m128i d = _mm_loadu_si128(from + 3);
    _mm_stream_si128(lines, a);
    _mm_stream_si128(lines + 1, b);
    _mm_stream_si128(lines + 2, c);
    _mm_stream_si128(lines + 3, d);
  }
  // Streaming stores are weakly ordered: fence them before whatever
  // publishes the copy (a lock release, an atomic) to another thread.
  _mm_sfence();
  std::memcpy(lines, from, bytes % 64);
#else
  std::memcpy(dst, src, bytes);
#endif
}

}  // namespace resound

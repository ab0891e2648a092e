// BulkCopy::Copy against memcpy: lengths on both sides of the streaming
// threshold and of a 64-byte line, with source and destination at every
// offset within a line, so the head, the streamed lines and the tail each
// get exercised alone and together. Bytes just outside the destination
// range must stay untouched.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "check.h"
#include "resound/bulk_copy.h"

namespace resound {
namespace {

constexpr std::byte kGuard{0xA5};

void CheckCopy(size_t bytes, size_t src_offset, size_t dst_offset) {
  std::vector<std::byte> src(bytes + 128);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>((i * 131 + bytes) & 0xFF);
  std::vector<std::byte> dst(bytes + 256, kGuard);
  // One guard line before the destination range, at least one after.
  std::byte* const out = dst.data() + 64 + dst_offset;
  BulkCopy::Copy(out, src.data() + src_offset, bytes);
  RESOUND_CHECK(std::memcmp(out, src.data() + src_offset, bytes) == 0);
  for (std::byte* p = dst.data(); p < out; ++p) RESOUND_CHECK(*p == kGuard);
  for (std::byte* p = out + bytes; p < dst.data() + dst.size(); ++p) RESOUND_CHECK(*p == kGuard);
}

}  // namespace
}  // namespace resound

int main() {
  using resound::BulkCopy;
  using resound::CheckCopy;
  const size_t threshold = BulkCopy::kStreamingBytes;
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{4096}, threshold - 1,
                       threshold, threshold + 1, threshold + 63, threshold + 64, 3 * threshold + 17}) {
    for (size_t src_offset : {0, 1, 8, 15, 16, 33, 63}) {
      for (size_t dst_offset : {0, 1, 8, 15, 16, 48, 63}) CheckCopy(bytes, src_offset, dst_offset);
    }
  }
  std::printf("bulk_copy_test: OK\n");
  return 0;
}

// Copies of large payloads into memory that will not be read again soon.
//
// A chunk of a 400 KB step is written once by its writer and read again only
// when it is sampled, long after it has left the caches. An ordinary memcpy
// into such cold memory first reads every destination cache line (the store
// must own the line) and then writes it back: twice the memory traffic of
// the copy itself, and it pushes hotter data out of the caches. Streaming
// (non-temporal) stores write whole lines straight to memory instead; here
// they copy 400 KB into cold memory in 14 us where memcpy takes 25 us.
// glibc switches to them only for copies larger than a share of the last-
// level cache (tens of MB), so the switch is made here.
//
// Small copies stay with memcpy: their destinations are likely to be read
// soon, from the cache that the streaming stores would bypass. So do copies
// into memory that is reused and read back at once (a sampled batch that
// fits in the cache): there the ordinary copy leaves the data where the
// reader finds it.
#ifndef RESOUND_BULK_COPY_H_
#define RESOUND_BULK_COPY_H_

#include <cstddef>

namespace resound {

class BulkCopy {
 public:
  // Copies at least this many bytes stream past the caches (x86-64 only;
  // elsewhere every copy is a memcpy).
  static constexpr size_t kStreamingBytes = 256 * 1024;

  BulkCopy() = delete;

  // memcpy(dst, src, bytes) for ranges that do not overlap; copies of
  // kStreamingBytes or more with Stream.
  static void Copy(void* dst, const void* src, size_t bytes) noexcept;

  // memcpy(dst, src, bytes) for ranges that do not overlap, the whole lines
  // of `dst` written with streaming stores, ordered before anything this
  // thread stores next.
  static void Stream(void* dst, const void* src, size_t bytes) noexcept;
};

}  // namespace resound

#endif  // RESOUND_BULK_COPY_H_

// Where a received socket message lands: storage that keeps its capacity
// between messages and is never zero-filled (a std::vector resized up to the
// 64 KB frame limit before every receive cleared that much memory each time,
// a few microseconds per call on both ends).
#ifndef RESOUND_LOCAL_MESSAGE_BUFFER_H_
#define RESOUND_LOCAL_MESSAGE_BUFFER_H_

#include <cstddef>
#include <memory>
#include <span>

namespace resound::local {

class MessageBuffer {
 public:
  // Room for `bytes` (what was received before is dropped); returns it.
  std::span<std::byte> Reserve(size_t bytes) {
    if (bytes > capacity_) {
      storage_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
      capacity_ = bytes;
    }
    size_ = 0;
    return {storage_.get(), bytes};
  }
  // The message received into Reserve's room has `bytes` bytes.
  void SetSize(size_t bytes) noexcept { size_ = bytes <= capacity_ ? bytes : capacity_; }

  const std::byte* data() const noexcept { return storage_.get(); }
  size_t size() const noexcept { return size_; }
  const std::byte* begin() const noexcept { return storage_.get(); }
  const std::byte* end() const noexcept { return storage_.get() + size_; }
  // (A contiguous range: std::span<const std::byte> views it.)

 private:
  std::unique_ptr<std::byte[]> storage_;
  size_t capacity_ = 0;
  size_t size_ = 0;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_MESSAGE_BUFFER_H_

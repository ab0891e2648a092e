// Owned payload bytes of a chunk.
#ifndef RESOUND_PAYLOAD_BUFFER_H_
#define RESOUND_PAYLOAD_BUFFER_H_

#include <cstddef>
#include <memory>

namespace resound {

// A byte buffer that is allocated without being zeroed first: the payload
// is always overwritten right after allocation, so zeroing would cost a
// second pass over memory for every chunk.
class PayloadBuffer {
 public:
  PayloadBuffer() = default;
  explicit PayloadBuffer(size_t size)
      : data_(std::make_unique_for_overwrite<std::byte[]>(size)), size_(size) {}
  std::byte* data() noexcept { return data_.get(); }
  const std::byte* data() const noexcept { return data_.get(); }
  size_t size() const noexcept { return size_; }

 private:
  std::unique_ptr<std::byte[]> data_;
  size_t size_ = 0;
};

}  // namespace resound

#endif  // RESOUND_PAYLOAD_BUFFER_H_

// Encodes one checkpoint record's payload (docs/checkpoint-format.md):
// fixed-width little-endian fields and length-prefixed strings, shared by the
// table files and the manifest of a checkpoint directory.
#ifndef RESOUND_CHECKPOINT_RECORD_ENCODER_H_
#define RESOUND_CHECKPOINT_RECORD_ENCODER_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace resound {

static_assert(std::endian::native == std::endian::little, "checkpoint records assume a little-endian host");

// Appends fixed-width little-endian fields and length-prefixed strings.
class CheckpointRecordEncoder {
 public:
  template <typename T>
  CheckpointRecordEncoder& Put(T value) {
    static_assert(std::is_arithmetic_v<T>);
    const auto* bytes = reinterpret_cast<const char*>(&value);
    out_.append(bytes, sizeof value);
    return *this;
  }
  CheckpointRecordEncoder& PutString(std::string_view text) {
    Put<uint64_t>(text.size());
    out_.append(text);
    return *this;
  }
  std::span<const std::byte> bytes() const noexcept {
    return {reinterpret_cast<const std::byte*>(out_.data()), out_.size()};
  }

 private:
  std::string out_;
};

}  // namespace resound

#endif  // RESOUND_CHECKPOINT_RECORD_ENCODER_H_

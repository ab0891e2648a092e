// The element type of a chunk, written as a numpy array-interface type string
// ("<f4", "|b1", "<U8", "|S16"). The core never interprets the payload; it only
// needs the element size (to check chunk sizes) and equality (to check that the
// slices of a column agree).
//
// Every chunk holds one, so it is stored inline in 20 bytes rather than as a
// std::string (32 bytes, plus a heap block for long strings).
#ifndef RESOUND_DTYPE_H_
#define RESOUND_DTYPE_H_

#include <array>
#include <cstdint>
#include <string_view>

namespace resound {

class DType {
 public:
  // Longest accepted type string: byte order, kind and up to 13 digits (the
  // size itself is at most 2**31, so longer strings only add leading zeros).
  static constexpr size_t kMaxLength = 15;

  // Parses and validates a type string; throws InvalidArgumentError naming
  // `dtype` and the accepted forms. Sizes must be ones numpy has a type for
  // (b: 1; i, u: 1, 2, 4, 8; f: 2, 4, 8, 16; c: 8, 16, 32; S, U, V: any):
  // a chunk of '<f3' could be stored but never decoded by any client.
  static DType Parse(std::string_view typestr);
  // Parse without the size rule, for chunks stored before it (checkpoints):
  // refusing one would refuse the whole checkpoint, every good item with it.
  static DType ParseStored(std::string_view typestr);

  std::string_view str() const noexcept { return {text_.data(), length_}; }
  // The kind character: one of "biufcSUV".
  char kind() const noexcept { return text_[1]; }
  int64_t itemsize() const noexcept { return kind() == 'U' ? int64_t{count_} * 4 : int64_t{count_}; }

  friend bool operator==(const DType& a, const DType& b) noexcept {
    // Unused characters are zero, so whole buffers compare like the strings.
    return a.length_ == b.length_ && a.text_ == b.text_;
  }
  friend bool operator!=(const DType& a, const DType& b) noexcept { return !(a == b); }

 private:
  DType(std::string_view typestr, uint32_t count) noexcept;
  static DType ParseChecked(std::string_view typestr, bool check_size);

  std::array<char, kMaxLength> text_{};
  uint8_t length_ = 0;
  uint32_t count_ = 0;  // the number in the string: bytes, or characters for 'U'
};

}  // namespace resound

#endif  // RESOUND_DTYPE_H_

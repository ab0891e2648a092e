// The element type of a chunk, written as a numpy array-interface type string
// ("<f4", "|b1", "<U8", "|S16"). The core never interprets the payload; it only
// needs the element size (to check chunk sizes) and equality (to check that the
// slices of a column agree).
#ifndef RESOUND_DTYPE_H_
#define RESOUND_DTYPE_H_

#include <cstdint>
#include <string>

namespace resound {

class DType {
 public:
  // Parses and validates a type string; throws InvalidArgumentError naming
  // `dtype` and the accepted forms.
  static DType Parse(const std::string& typestr);

  const std::string& str() const noexcept { return typestr_; }
  int64_t itemsize() const noexcept { return itemsize_; }

  friend bool operator==(const DType& a, const DType& b) noexcept {
    return a.typestr_ == b.typestr_;
  }
  friend bool operator!=(const DType& a, const DType& b) noexcept { return !(a == b); }

 private:
  DType(std::string typestr, int64_t itemsize) : typestr_(std::move(typestr)), itemsize_(itemsize) {}
  std::string typestr_;
  int64_t itemsize_;
};

}  // namespace resound

#endif  // RESOUND_DTYPE_H_

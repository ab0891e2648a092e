#include "resound/dtype.h"

#include <cctype>
#include <string>

#include "resound/errors.h"

namespace resound {
namespace {

constexpr const char* kAccepted =
    "dtype must be a numpy type string '<byteorder><kind><size>' with byteorder in '<>|=', kind "
    "in 'biufcSUV' and a size numpy has for the kind (b: 1; i, u: 1, 2, 4, 8; f: 2, 4, 8, 16; "
    "c: 8, 16, 32; S, U, V: any), e.g. '<f4', '|b1', '<U8'";

[[noreturn]] void Reject(std::string_view typestr, const std::string& why) {
  throw InvalidArgumentError(std::string(kAccepted) + "; got '" + std::string(typestr) + "': " + why);
}

// Whether numpy has a type of `kind` and `size` bytes (characters for 'U').
// Long doubles (f16, c32) are the 64-bit platforms' size; f12/c24 (32-bit
// x86) are left out, as no 64-bit client could decode them.
bool NumpyHasSize(char kind, int64_t size) {
  switch (kind) {
    case 'i':
    case 'u':
      return size == 1 || size == 2 || size == 4 || size == 8;
    case 'f':
      return size == 2 || size == 4 || size == 8 || size == 16;
    case 'c':
      return size == 8 || size == 16 || size == 32;
    default:
      return true;  // S, U and V have any size ('b' is checked before)
  }
}

}  // namespace

DType::DType(std::string_view typestr, uint32_t count) noexcept
    : length_(static_cast<uint8_t>(typestr.size())), count_(count) {
  typestr.copy(text_.data(), typestr.size());
}

DType DType::Parse(std::string_view typestr) { return ParseChecked(typestr, true); }

DType DType::ParseStored(std::string_view typestr) { return ParseChecked(typestr, false); }

DType DType::ParseChecked(std::string_view typestr, bool check_size) {
  if (typestr.size() < 3) Reject(typestr, "too short");
  if (std::string_view("<>|=").find(typestr[0]) == std::string_view::npos) {
    Reject(typestr, "unknown byte order");
  }
  const char kind = typestr[1];
  if (std::string_view("biufcSUV").find(kind) == std::string_view::npos) {
    Reject(typestr, "unsupported kind");
  }
  int64_t count = 0;
  for (size_t i = 2; i < typestr.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(typestr[i]))) Reject(typestr, "size is not a number");
    count = count * 10 + (typestr[i] - '0');
    if (count > (int64_t{1} << 31)) Reject(typestr, "size is too large");
  }
  if (count <= 0) Reject(typestr, "size must be positive");
  if (typestr.size() > kMaxLength) Reject(typestr, "too many leading zeros in the size");
  // numpy counts unicode sizes in characters of 4 bytes each (see itemsize()).
  if (kind == 'b' && count != 1) Reject(typestr, "bool has size 1");
  if (check_size && !NumpyHasSize(kind, count)) {
    Reject(typestr, "numpy has no type of kind '" + std::string(1, kind) + "' and size " +
                        std::to_string(count) + ", so no client could decode it");
  }
  return DType(typestr, static_cast<uint32_t>(count));
}

}  // namespace resound

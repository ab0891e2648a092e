#include "resound/dtype.h"

#include <cctype>
#include <string>

#include "resound/errors.h"

namespace resound {
namespace {

[[noreturn]] void Reject(std::string_view typestr, const char* why) {
  throw InvalidArgumentError(
      "dtype must be a numpy type string '<byteorder><kind><size>' with byteorder in '<>|=' and "
      "kind in 'biufcSUV' (e.g. '<f4', '|b1', '<U8'); got '" + std::string(typestr) + "': " + why);
}

}  // namespace

DType::DType(std::string_view typestr, uint32_t count) noexcept
    : length_(static_cast<uint8_t>(typestr.size())), count_(count) {
  typestr.copy(text_.data(), typestr.size());
}

DType DType::Parse(std::string_view typestr) {
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
  return DType(typestr, static_cast<uint32_t>(count));
}

}  // namespace resound

#include "resound/dtype.h"

#include <cctype>
#include <string_view>

#include "resound/errors.h"

namespace resound {
namespace {

[[noreturn]] void Reject(const std::string& typestr, const char* why) {
  throw InvalidArgumentError(
      "dtype must be a numpy type string '<byteorder><kind><size>' with byteorder in '<>|=' and "
      "kind in 'biufcSUV' (e.g. '<f4', '|b1', '<U8'); got '" + typestr + "': " + why);
}

}  // namespace

DType DType::Parse(const std::string& typestr) {
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
  // numpy counts unicode sizes in characters of 4 bytes each.
  const int64_t itemsize = kind == 'U' ? count * 4 : count;
  if (kind == 'b' && itemsize != 1) Reject(typestr, "bool has size 1");
  return DType(typestr, itemsize);
}

}  // namespace resound

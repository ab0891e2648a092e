// How error messages spell a shape: "[2, 3]", with "?" for a dimension of
// any size (-1). Shared so every message about shapes reads the same.
#ifndef RESOUND_SHAPE_TEXT_H_
#define RESOUND_SHAPE_TEXT_H_

#include <cstdint>
#include <span>
#include <string>

namespace resound {

inline std::string ShapeText(std::span<const int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i] < 0 ? "?" : std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace resound

#endif  // RESOUND_SHAPE_TEXT_H_

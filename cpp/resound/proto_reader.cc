#include "resound/proto_reader.h"

#include <string>

#include "resound/errors.h"

namespace resound {
namespace {

// Reads a varint at message[*at], advancing *at; false if it runs past the end
// or over ten bytes.
bool ReadVarint(std::span<const uint8_t> message, size_t* at, uint64_t* value) noexcept {
  *value = 0;
  for (int shift = 0; shift < 64 && *at < message.size(); shift += 7) {
    const uint8_t byte = message[(*at)++];
    *value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

std::optional<FieldLocation> FindLengthDelimitedField(std::span<const uint8_t> message, uint32_t field_number) {
  std::optional<FieldLocation> found;
  size_t at = 0;
  while (at < message.size()) {
    const size_t field_start = at;
    uint64_t tag = 0;
    if (!ReadVarint(message, &at, &tag)) throw InvalidArgumentError("message: a field tag is cut off");
    const uint64_t number = tag >> 3;
    const uint64_t wire_type = tag & 7;
    uint64_t skip = 0;
    switch (wire_type) {
      case 0:  // varint
        if (!ReadVarint(message, &at, &skip)) throw InvalidArgumentError("message: a varint is cut off");
        skip = 0;
        break;
      case 1:  // 64-bit
        skip = 8;
        break;
      case 2:  // length-delimited
        if (!ReadVarint(message, &at, &skip)) throw InvalidArgumentError("message: a length is cut off");
        break;
      case 5:  // 32-bit
        skip = 4;
        break;
      default:  // groups (3, 4) are not used by proto3 messages
        throw InvalidArgumentError("message: field " + std::to_string(number) + " has an unsupported wire type " +
                                   std::to_string(wire_type));
    }
    if (skip > message.size() - at) {
      throw InvalidArgumentError("message: field " + std::to_string(number) + " runs past its end");
    }
    const size_t value_start = at;
    at += static_cast<size_t>(skip);
    if (number == field_number && wire_type == 2) found = FieldLocation{field_start, at, value_start};
  }
  return found;
}

}  // namespace resound

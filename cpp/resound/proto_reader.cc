#include "resound/proto_reader.h"

#include <bit>
#include <cstring>
#include <string>

#include "resound/errors.h"

namespace resound {

bool ProtoReader::ReadVarint(std::span<const uint8_t> message, size_t* at, uint64_t* value) noexcept {
  *value = 0;
  for (int shift = 0; shift < 64 && *at < message.size(); shift += 7) {
    const uint8_t byte = message[(*at)++];
    *value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

void ProtoReader::Fail(const std::string& problem) const { throw InvalidArgumentError(what_ + ": " + problem); }

bool ProtoReader::Next() {
  if (at_ >= message_.size()) return false;
  const size_t field_start = at_;
  uint64_t tag = 0;
  if (!ReadVarint(message_, &at_, &tag)) Fail("a field tag is cut off");
  const uint64_t number = tag >> 3;
  wire_type_ = static_cast<uint32_t>(tag & 7);
  if (number == 0 || number >= (1u << 29)) Fail("field number " + std::to_string(number) + " is out of range");
  field_ = static_cast<uint32_t>(number);
  uint64_t skip = 0;
  switch (wire_type_) {
    case kVarint:
      if (!ReadVarint(message_, &at_, &varint_)) Fail("the varint of field " + std::to_string(field_) + " is cut off");
      break;
    case kFixed64:
      skip = 8;
      break;
    case kLengthDelimited:
      if (!ReadVarint(message_, &at_, &skip)) Fail("the length of field " + std::to_string(field_) + " is cut off");
      break;
    case kFixed32:
      skip = 4;
      break;
    default:  // groups (3, 4) are not used by proto3 messages
      Fail("field " + std::to_string(field_) + " has an unsupported wire type " + std::to_string(wire_type_));
  }
  if (skip > message_.size() - at_) Fail("field " + std::to_string(field_) + " runs past its end");
  location_ = FieldLocation{field_start, at_ + static_cast<size_t>(skip), at_};
  at_ += static_cast<size_t>(skip);
  return true;
}

uint64_t ProtoReader::varint() const {
  if (wire_type_ != kVarint) Fail("field " + std::to_string(field_) + " is not a varint");
  return varint_;
}

std::span<const uint8_t> ProtoReader::bytes() const {
  if (wire_type_ != kLengthDelimited) Fail("field " + std::to_string(field_) + " is not length-delimited");
  return message_.subspan(location_.value_start, location_.field_end - location_.value_start);
}

std::string ProtoReader::string() const {
  const auto value = bytes();
  return std::string(reinterpret_cast<const char*>(value.data()), value.size());
}

void ProtoReader::AppendDoubles(std::vector<double>& out) const {
  // The wire's doubles are little-endian IEEE 754, as this host's are.
  static_assert(std::endian::native == std::endian::little, "doubles are copied as they are in memory");
  std::span<const uint8_t> values;
  if (wire_type_ == kFixed64) {
    values = message_.subspan(location_.value_start, 8);
  } else {
    values = bytes();
    if (values.size() % sizeof(double) != 0) {
      Fail("packed doubles of field " + std::to_string(field_) + " are not a whole number of doubles");
    }
  }
  const size_t at = out.size();
  out.resize(at + values.size() / sizeof(double));
  std::memcpy(out.data() + at, values.data(), values.size());
}

std::optional<FieldLocation> FindLengthDelimitedField(std::span<const uint8_t> message, uint32_t field_number) {
  std::optional<FieldLocation> found;
  ProtoReader reader(message, "message");
  while (reader.Next()) {
    if (reader.field() == field_number && reader.wire_type() == ProtoReader::kLengthDelimited) {
      found = reader.location();
    }
  }
  return found;
}

}  // namespace resound

#include "resound/proto_writer.h"

#include <bit>
#include <cstring>

namespace resound {

size_t ProtoWriter::VarintSize(uint64_t value) noexcept {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

void ProtoWriter::Varint(uint64_t value) {
  char bytes[10];
  size_t n = 0;
  while (value >= 0x80) {
    bytes[n++] = static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  bytes[n++] = static_cast<char>(value);
  data_.append(bytes, n);
}

void ProtoWriter::VarintField(uint32_t field, uint64_t value) {
  Tag(field, kVarint);
  Varint(value);
}

void ProtoWriter::BytesField(uint32_t field, std::string_view value) {
  Tag(field, kLengthDelimited);
  Varint(value.size());
  data_.append(value.data(), value.size());
}

void ProtoWriter::DoubleField(uint32_t field, double value) {
  Tag(field, kFixed64);
  static_assert(std::endian::native == std::endian::little, "doubles are copied as they are in memory");
  const size_t at = data_.size();
  data_.resize(at + sizeof value);
  std::memcpy(data_.data() + at, &value, sizeof value);
}

void ProtoWriter::PackedDoubles(uint32_t field, const std::vector<double>& values) {
  if (values.empty()) return;
  Tag(field, kLengthDelimited);
  Varint(values.size() * sizeof(double));
  const size_t at = data_.size();
  data_.resize(at + values.size() * sizeof(double));
  // The wire's doubles are little-endian IEEE 754, as this host's are.
  static_assert(std::endian::native == std::endian::little, "doubles are copied as they are in memory");
  std::memcpy(data_.data() + at, values.data(), values.size() * sizeof(double));
}

}  // namespace resound

// Writes protocol buffers' wire format (varints, packed repeated fields,
// length-delimited fields and nested messages) into a string.
//
// The service's Python layer builds most messages with the protobuf runtime;
// the few that carry thousands of items per message (InsertRequestEncoder) are
// written here instead, where a field of a thousand entries costs a loop
// rather than a thousand Python objects. tests/core/test_wire_encoding.py checks
// that the protobuf runtime reads what this writes.
#ifndef RESOUND_PROTO_WRITER_H_
#define RESOUND_PROTO_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace resound {

class ProtoWriter {
 public:
  // Wire types.
  static constexpr uint32_t kVarint = 0;
  static constexpr uint32_t kFixed64 = 1;
  static constexpr uint32_t kLengthDelimited = 2;

  static size_t VarintSize(uint64_t value) noexcept;

  void Varint(uint64_t value);
  void Tag(uint32_t field, uint32_t wire_type) { Varint((static_cast<uint64_t>(field) << 3) | wire_type); }
  // A varint field (int64, uint64, uint32, bool, enum): negative int64 values
  // take ten bytes, as protobuf writes them.
  void VarintField(uint32_t field, uint64_t value);
  void BytesField(uint32_t field, std::string_view value);
  void MessageField(uint32_t field, const ProtoWriter& message) { BytesField(field, message.data()); }
  // A packed repeated varint field; omitted when empty (proto3's encoding).
  template <typename T>
  void PackedVarints(uint32_t field, const std::vector<T>& values);
  void PackedDoubles(uint32_t field, const std::vector<double>& values);
  // A singular double field, written even when 0 (a reader's default).
  void DoubleField(uint32_t field, double value);

  // Room for `bytes` bytes in all (a message whose size is about known
  // grows once instead of doubling its way up).
  void Reserve(size_t bytes) { data_.reserve(bytes); }

  const std::string& data() const noexcept { return data_; }
  std::string& mutable_data() noexcept { return data_; }

 private:
  std::string data_;
};

template <typename T>
void ProtoWriter::PackedVarints(uint32_t field, const std::vector<T>& values) {
  static_assert(std::is_integral_v<T>, "varints hold integers");
  if (values.empty()) return;
  // Signed values go as their 64-bit two's complement (int64 semantics).
  const auto as_unsigned = [](T value) { return static_cast<uint64_t>(static_cast<int64_t>(value)); };
  size_t size = 0;
  for (const T value : values) size += VarintSize(std::is_signed_v<T> ? as_unsigned(value) : static_cast<uint64_t>(value));
  Tag(field, kLengthDelimited);
  Varint(size);
  for (const T value : values) Varint(std::is_signed_v<T> ? as_unsigned(value) : static_cast<uint64_t>(value));
}

}  // namespace resound

#endif  // RESOUND_PROTO_WRITER_H_

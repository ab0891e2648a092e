// Reads protocol buffers' wire format: a cursor over the fields of one
// serialized message, and FindLengthDelimitedField to locate one field without
// parsing the rest.
//
// The service decodes the messages that carry many items per message (sample
// responses, see sample_response.h) with it, and finds the chunk payloads of
// the others in place, leaving the small remainder to the protobuf runtime.
//
// The input comes from the network: every length is checked against the end
// of the buffer before it is used, and malformed input throws
// InvalidArgumentError, never reads out of bounds.
#ifndef RESOUND_PROTO_READER_H_
#define RESOUND_PROTO_READER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace resound {

// Where a length-delimited field lies in a message: the field (tag, length
// and value) spans [field_start, field_end), its value [value_start, field_end).
struct FieldLocation {
  size_t field_start = 0;
  size_t field_end = 0;
  size_t value_start = 0;
};

class ProtoReader {
 public:
  // Wire types.
  static constexpr uint32_t kVarint = 0;
  static constexpr uint32_t kFixed64 = 1;
  static constexpr uint32_t kLengthDelimited = 2;
  static constexpr uint32_t kFixed32 = 5;

  // `what` names the message in errors ("SampleResponse.items").
  ProtoReader(std::span<const uint8_t> message, std::string what) noexcept
      : message_(message), what_(std::move(what)) {}

  // Moves to the next field; false at the end of the message. Throws
  // InvalidArgumentError if the field is cut off or uses a group.
  bool Next();

  uint32_t field() const noexcept { return field_; }
  uint32_t wire_type() const noexcept { return wire_type_; }
  const FieldLocation& location() const noexcept { return location_; }
  // The value of a varint field (InvalidArgumentError for another wire type).
  uint64_t varint() const;
  // The value of a length-delimited field.
  std::span<const uint8_t> bytes() const;
  std::string string() const;

  // The values of a repeated scalar field appended to `out`: a packed field
  // (length-delimited) holds many, an unpacked one a single value; parsers
  // must accept both.
  template <typename T>
  void AppendVarints(std::vector<T>& out) const;
  void AppendDoubles(std::vector<double>& out) const;

  // A reader of the current field's value, a nested message.
  ProtoReader Nested(const char* name) const { return ProtoReader(bytes(), what_ + "." + name); }
  const std::string& what() const noexcept { return what_; }

 private:
  // Reads a varint at message[*at], advancing *at; false if it runs past
  // `end` or over ten bytes.
  static bool ReadVarint(std::span<const uint8_t> message, size_t* at, uint64_t* value) noexcept;
  [[noreturn]] void Fail(const std::string& problem) const;

  std::span<const uint8_t> message_;
  std::string what_;
  size_t at_ = 0;
  uint32_t field_ = 0;
  uint32_t wire_type_ = 0;
  uint64_t varint_ = 0;
  FieldLocation location_;
};

template <typename T>
void ProtoReader::AppendVarints(std::vector<T>& out) const {
  static_assert(std::is_integral_v<T>, "varints hold integers");
  // Narrowing keeps the low bits, as protobuf does for int32 and uint32; a
  // bool field (read into bool or uint8_t, the service's byte-per-flag
  // arrays) is 0 or 1, as protobuf reads any nonzero varint as true.
  const auto convert = [](uint64_t value) {
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t>) return static_cast<T>(value != 0);
    return static_cast<T>(value);
  };
  if (wire_type_ == kVarint) {
    out.push_back(convert(varint_));
    return;
  }
  const std::span<const uint8_t> packed = bytes();
  size_t at = 0;
  while (at < packed.size()) {
    uint64_t value = 0;
    if (!ReadVarint(packed, &at, &value)) Fail("a packed varint of field " + std::to_string(field_) + " is cut off");
    out.push_back(convert(value));
  }
}

// The last top-level length-delimited field `field_number` of `message` (the
// one protobuf keeps for a bytes field), or nullopt if there is none. Throws
// InvalidArgumentError if the message is malformed before its end (a cut
// varint or field, a group or an unknown wire type).
std::optional<FieldLocation> FindLengthDelimitedField(std::span<const uint8_t> message, uint32_t field_number);

}  // namespace resound

#endif  // RESOUND_PROTO_READER_H_

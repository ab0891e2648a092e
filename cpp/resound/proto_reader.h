// Reads just enough of protocol buffers' wire format to find one field of a
// serialized message without parsing the rest: how the service locates a
// message's chunk payloads (its `chunk_data` field) and reads them in place,
// leaving the small remainder to the protobuf runtime.
//
// The input comes from the network: every length is checked against the end
// of the buffer before it is used.
#ifndef RESOUND_PROTO_READER_H_
#define RESOUND_PROTO_READER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace resound {

// Where a length-delimited field lies in a message: the field (tag, length
// and value) spans [field_start, field_end), its value [value_start, field_end).
struct FieldLocation {
  size_t field_start = 0;
  size_t field_end = 0;
  size_t value_start = 0;
};

// The last top-level length-delimited field `field_number` of `message` (the
// one protobuf keeps for a bytes field), or nullopt if there is none. Throws
// InvalidArgumentError if the message is malformed before its end (a cut
// varint or field, a group or an unknown wire type).
std::optional<FieldLocation> FindLengthDelimitedField(std::span<const uint8_t> message, uint32_t field_number);

}  // namespace resound

#endif  // RESOUND_PROTO_READER_H_

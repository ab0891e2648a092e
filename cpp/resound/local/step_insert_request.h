// client.insert's request over the same-host transport (method
// kInsertStep): one step of data, each field in a one-step chunk of its own,
// and one item per table using all of them, whole. The server answers with
// an InsertResponse, as to an InsertRequest; the step's chunks are held by
// its items alone, so the pooled connection that carried the call keeps
// nothing in its session afterwards.
//
// Fixed-width records instead of an InsertRequest's protobuf: writing and
// reading that message's ~25 repeated fields (each a vector on the server)
// took about a third of the server's and client's own work for a 4 KB step.
// The client writes the request straight from the caller's arrays into its
// upload region, in the data-tail layout (a u64 message size, the message,
// the payloads): one copy of each payload on this side.
//
// Message layout (little-endian, every part 8-byte aligned):
//   u64 episode id, u32 fields, u32 items,
//   fields records of (u64 chunk key, u64 payload bytes, dtype string
//     zero-padded to 16 bytes, u32 dimensions, u32 0),
//   the fields' dimensions (i64 each, field after field),
//   items records of (u64 key, f64 priority, u32 table name bytes, u32 0,
//     the table's name zero-padded to a multiple of 8 bytes);
// and the data tail: the fields' payloads back to back, in field order.
//
// Example:
//   const float obs[3] = {1, 2, 3};
//   StepInsertRequest request({{.key = 11, .dtype = DType::Parse("<f4"), .shape = {3},
//                               .data = std::as_bytes(std::span(obs))}},
//                             /*episode_id=*/5, {{"replay", 7, 1.0}});
//   std::vector<std::byte> out(request.bytes());
//   request.Write(out);  // chunk 11 and item 7 of table "replay"
//   // The server, given the message and the data tail of `out`:
//   const StepInsertRequest read = StepInsertRequest::Read(message, data_tail);
#ifndef RESOUND_LOCAL_STEP_INSERT_REQUEST_H_
#define RESOUND_LOCAL_STEP_INSERT_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "resound/chunk.h"
#include "resound/dtype.h"

namespace resound::local {

class StepInsertRequest {
 public:
  // One field of the step: the chunk `key` is made of, and its bytes
  // (C-contiguous, of `shape` elements of `dtype`).
  struct Field {
    uint64_t key = 0;
    DType dtype = DType::Parse("<f4");
    std::vector<int64_t> shape;
    std::span<const std::byte> data;
  };
  struct Item {
    std::string table;
    uint64_t key = 0;
    double priority = 0.0;
  };
  // Longer table names are refused (InvalidArgumentError).
  static constexpr size_t kMaxTableBytes = 4096;
  // Fields of more dimensions are refused (numpy's own limit).
  static constexpr uint32_t kMaxDimensions = 64;

  // Checks each field's data against its dtype and shape, and each table
  // name's length (InvalidArgumentError naming the field or item). `fields`'
  // data must stay valid until Write.
  StepInsertRequest(std::vector<Field> fields, uint64_t episode_id, std::vector<Item> items);

  // The request in `message` with its payloads in `data_tail` (views into
  // it: the fields' data), checked whole as the constructor checks; else
  // InvalidArgumentError naming what is wrong (a client's bytes: anything
  // may be there).
  static StepInsertRequest Read(std::span<const std::byte> message, std::span<const std::byte> data_tail);

  // The size of the request: a u64 message size, the message, the payloads.
  size_t bytes() const noexcept { return sizeof(uint64_t) + message_bytes_ + data_bytes_; }
  // Writes the request into `out`, which holds bytes() bytes.
  void Write(std::span<std::byte> out) const noexcept;

  uint64_t episode_id() const noexcept { return episode_id_; }
  const std::vector<Field>& fields() const noexcept { return fields_; }
  const std::vector<Item>& items() const noexcept { return items_; }
  // The one-step chunk field `index` is made of.
  ChunkMetadata ChunkOf(size_t index) const;

 private:
  StepInsertRequest() = default;
  // Checks the fields and items; sets the sizes.
  void Check();

  std::vector<Field> fields_;
  uint64_t episode_id_ = 0;
  std::vector<Item> items_;
  size_t message_bytes_ = 0;
  size_t data_bytes_ = 0;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_STEP_INSERT_REQUEST_H_

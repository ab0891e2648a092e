// client.insert's request over the same-host transport: one step of data,
// each field in a one-step chunk of its own, one item per table using all of
// them, and the same chunks released in the same message. The server
// releases them once the items hold them (releases follow the items), so the
// pooled connection that carried the call keeps nothing in its session
// afterwards. Written in the data-tail layout (wire::WriteWithDataTail)
// straight from the caller's arrays into the upload region: one copy of each
// payload on this side, where a writer's path first copies it into a client
// chunk and then out of it.
//
// Example:
//   const float obs[3] = {1, 2, 3};
//   StepInsertRequest request({{.key = 11, .dtype = DType::Parse("<f4"), .shape = {3},
//                               .data = std::as_bytes(std::span(obs))}},
//                             /*episode_id=*/5, {{"replay", 7, 1.0}});
//   std::vector<std::byte> out(request.bytes());
//   request.Write(out);  // an InsertRequest of chunk 11 and item 7, releasing 11
#ifndef RESOUND_LOCAL_STEP_INSERT_REQUEST_H_
#define RESOUND_LOCAL_STEP_INSERT_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

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

  // Checks each field's data against its dtype and shape
  // (InvalidArgumentError naming the field) and writes the message. `fields`'
  // data must stay valid until Write.
  StepInsertRequest(std::vector<Field> fields, uint64_t episode_id, const std::vector<Item>& items);

  // The size of the request: a u64 message size, the message, the payloads.
  size_t bytes() const noexcept { return sizeof(uint64_t) + message_.size() + data_bytes_; }
  // Writes the request into `out`, which holds bytes() bytes.
  void Write(std::span<std::byte> out) const noexcept;

 private:
  std::vector<Field> fields_;
  std::string message_;
  size_t data_bytes_ = 0;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_STEP_INSERT_REQUEST_H_

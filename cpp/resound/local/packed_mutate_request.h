// A MutatePriorities request as the same-host transport carries it (method
// kMutatePrioritiesPacked): fixed-width records instead of protobuf's
// varints, written by the client straight into its upload region and read
// by the server with two copies. Writing and reading the varints of a
// learner's random 64-bit keys took about a fifth of a 100-key priority
// update's same-host round trip.
//
// Layout (little-endian, every part 8-byte aligned):
//   u32 table name bytes, u32 0, u64 updates, u64 deletes,
//   the table's name, zero-padded to a multiple of 8 bytes,
//   updates records of (u64 key, f64 priority),
//   deletes keys (u64).
//
// Example:
//   std::vector<std::byte> out(PackedMutateRequest::Bytes("t", 1, 0));
//   PackedMutateRequest::Write(out, "t", {{{7, 0.5}}}, {});
//   const PackedMutateRequest request = PackedMutateRequest::Read(out);  // table "t", 7 -> 0.5
#ifndef RESOUND_LOCAL_PACKED_MUTATE_REQUEST_H_
#define RESOUND_LOCAL_PACKED_MUTATE_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace resound::local {

class PackedMutateRequest {
 public:
  using Update = std::pair<uint64_t, double>;  // key, priority
  static constexpr size_t kHeaderBytes = 24;
  // Longer table names are refused (InvalidArgumentError).
  static constexpr size_t kMaxTableBytes = 4096;

  // The size of a request; InvalidArgumentError for a table name past
  // kMaxTableBytes or counts whose size would overflow.
  static size_t Bytes(std::string_view table, size_t num_updates, size_t num_deletes);
  // Writes the request into `out`, which holds Bytes(...) bytes.
  static void Write(std::span<std::byte> out, std::string_view table, std::span<const Update> updates,
                    std::span<const uint64_t> deletes) noexcept;
  // The request `raw` holds, whole; InvalidArgumentError naming what is
  // wrong otherwise (a client's bytes: anything may be there).
  static PackedMutateRequest Read(std::span<const std::byte> raw);

  std::string table;
  std::vector<Update> updates;
  std::vector<uint64_t> deletes;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_PACKED_MUTATE_REQUEST_H_

#include "resound/local/packed_mutate_request.h"

#include <cstring>

#include "resound/errors.h"
#include "resound/local/fixed_fields.h"

namespace resound::local {
namespace {

constexpr size_t kRecordBytes = 16;  // u64 key, f64 priority

constexpr size_t Padded(size_t bytes) noexcept { return (bytes + 7) / 8 * 8; }

}  // namespace

size_t PackedMutateRequest::Bytes(std::string_view table, size_t num_updates, size_t num_deletes) {
  if (table.size() > kMaxTableBytes) {
    throw InvalidArgumentError("table name of " + std::to_string(table.size()) + " bytes is longer than " +
                               std::to_string(kMaxTableBytes));
  }
  constexpr size_t kMax = static_cast<size_t>(-1);
  const size_t fixed = kHeaderBytes + Padded(table.size());
  if (num_updates > (kMax - fixed) / kRecordBytes ||
      num_deletes > (kMax - fixed - num_updates * kRecordBytes) / sizeof(uint64_t)) {
    throw InvalidArgumentError("too many keys for one priority update");
  }
  return fixed + num_updates * kRecordBytes + num_deletes * sizeof(uint64_t);
}

void PackedMutateRequest::Write(std::span<std::byte> out, std::string_view table, std::span<const Update> updates,
                                std::span<const uint64_t> deletes) noexcept {
  std::byte* at = out.data();
  PutField<uint32_t>(at, 0, static_cast<uint32_t>(table.size()));
  PutField<uint32_t>(at, 4, 0);
  PutField<uint64_t>(at, 8, updates.size());
  PutField<uint64_t>(at, 16, deletes.size());
  at += kHeaderBytes;
  std::memset(at, 0, Padded(table.size()));
  if (!table.empty()) std::memcpy(at, table.data(), table.size());
  at += Padded(table.size());
  for (const auto& [key, priority] : updates) {
    PutField<uint64_t>(at, 0, key);
    PutField<double>(at, 8, priority);
    at += kRecordBytes;
  }
  if (!deletes.empty()) std::memcpy(at, deletes.data(), deletes.size_bytes());
}

PackedMutateRequest PackedMutateRequest::Read(std::span<const std::byte> raw) {
  const auto malformed = [&](const std::string& what) {
    return InvalidArgumentError("malformed packed MutatePriorities request (" + std::to_string(raw.size()) +
                                " bytes): " + what);
  };
  if (raw.size() < kHeaderBytes) throw malformed("shorter than its header");
  const auto table_bytes = GetField<uint32_t>(raw.data(), 0);
  if (GetField<uint32_t>(raw.data(), 4) != 0) throw malformed("a reserved word is not 0");
  const auto num_updates = GetField<uint64_t>(raw.data(), 8);
  const auto num_deletes = GetField<uint64_t>(raw.data(), 16);
  if (table_bytes > kMaxTableBytes) throw malformed("a table name longer than " + std::to_string(kMaxTableBytes));
  // Each count checked against the size first: the products cannot overflow.
  if (num_updates > raw.size() / kRecordBytes || num_deletes > raw.size() / sizeof(uint64_t)) {
    throw malformed("more keys than it has bytes for");
  }
  const size_t expected = kHeaderBytes + Padded(table_bytes) + static_cast<size_t>(num_updates) * kRecordBytes +
                          static_cast<size_t>(num_deletes) * sizeof(uint64_t);
  if (expected != raw.size()) {
    throw malformed("its counts say " + std::to_string(expected) + " bytes");
  }
  PackedMutateRequest request;
  const std::byte* at = raw.data() + kHeaderBytes;
  request.table.assign(reinterpret_cast<const char*>(at), table_bytes);
  at += Padded(table_bytes);
  request.updates.resize(static_cast<size_t>(num_updates));
  for (Update& update : request.updates) {
    update = {GetField<uint64_t>(at, 0), GetField<double>(at, 8)};
    at += kRecordBytes;
  }
  request.deletes.resize(static_cast<size_t>(num_deletes));
  if (num_deletes > 0) std::memcpy(request.deletes.data(), at, request.deletes.size() * sizeof(uint64_t));
  return request;
}

}  // namespace resound::local

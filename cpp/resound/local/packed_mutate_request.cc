#include "resound/local/packed_mutate_request.h"

#include <cstring>

#include "resound/errors.h"

namespace resound::local {
namespace {

constexpr size_t kRecordBytes = 16;  // u64 key, f64 priority

constexpr size_t Padded(size_t bytes) noexcept { return (bytes + 7) / 8 * 8; }

uint64_t ReadU64(const std::byte* at) noexcept {
  uint64_t value = 0;
  std::memcpy(&value, at, sizeof value);  // little-endian hosts only (Linux x86-64, aarch64)
  return value;
}

uint32_t ReadU32(const std::byte* at) noexcept {
  uint32_t value = 0;
  std::memcpy(&value, at, sizeof value);
  return value;
}

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
  const auto table_bytes = static_cast<uint32_t>(table.size());
  const uint32_t zero = 0;
  const uint64_t num_updates = updates.size();
  const uint64_t num_deletes = deletes.size();
  std::memcpy(at, &table_bytes, 4);
  std::memcpy(at + 4, &zero, 4);
  std::memcpy(at + 8, &num_updates, 8);
  std::memcpy(at + 16, &num_deletes, 8);
  at += kHeaderBytes;
  std::memset(at, 0, Padded(table.size()));
  if (!table.empty()) std::memcpy(at, table.data(), table.size());
  at += Padded(table.size());
  for (const auto& [key, priority] : updates) {
    std::memcpy(at, &key, 8);
    std::memcpy(at + 8, &priority, 8);
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
  const uint32_t table_bytes = ReadU32(raw.data());
  if (ReadU32(raw.data() + 4) != 0) throw malformed("a reserved word is not 0");
  const uint64_t num_updates = ReadU64(raw.data() + 8);
  const uint64_t num_deletes = ReadU64(raw.data() + 16);
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
    std::memcpy(&update.first, at, 8);
    std::memcpy(&update.second, at + 8, 8);
    at += kRecordBytes;
  }
  request.deletes.resize(static_cast<size_t>(num_deletes));
  if (num_deletes > 0) std::memcpy(request.deletes.data(), at, request.deletes.size() * sizeof(uint64_t));
  return request;
}

}  // namespace resound::local

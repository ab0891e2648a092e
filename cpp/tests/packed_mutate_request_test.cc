// The same-host transport's packed MutatePriorities request: what the client
// writes, the server reads back whole; every cut, padded or miscounted
// request (a client's bytes) is refused without reading past its end.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "resound/errors.h"
#include "resound/local/packed_mutate_request.h"

namespace resound::local {
namespace {

using Update = PackedMutateRequest::Update;

std::vector<std::byte> Written(const std::string& table, const std::vector<Update>& updates,
                               const std::vector<uint64_t>& deletes) {
  std::vector<std::byte> out(PackedMutateRequest::Bytes(table, updates.size(), deletes.size()));
  PackedMutateRequest::Write(out, table, updates, deletes);
  return out;
}

void RoundTrips() {
  const std::vector<Update> updates = {{0, 0.0}, {std::numeric_limits<uint64_t>::max(), 2.5}, {7, 1e-300}};
  const std::vector<uint64_t> deletes = {3, std::numeric_limits<uint64_t>::max()};
  for (const std::string& table :
       std::vector<std::string>{"", "t", "replay table", std::string(PackedMutateRequest::kMaxTableBytes, 'x')}) {
    const std::vector<std::byte> bytes = Written(table, updates, deletes);
    RESOUND_CHECK(bytes.size() % 8 == 0);  // every part 8-byte aligned
    const PackedMutateRequest read = PackedMutateRequest::Read(bytes);
    RESOUND_CHECK(read.table == table);
    RESOUND_CHECK(read.updates == updates);
    RESOUND_CHECK(read.deletes == deletes);
  }
  const PackedMutateRequest empty = PackedMutateRequest::Read(Written("t", {}, {}));
  RESOUND_CHECK(empty.table == "t" && empty.updates.empty() && empty.deletes.empty());
}

void RefusesWhatDoesNotAddUp() {
  const std::vector<std::byte> good = Written("table", {{1, 1.0}, {2, 2.0}}, {9});
  const auto refused = [](const std::vector<std::byte>& bytes) {
    return Throws<InvalidArgumentError>([&] { PackedMutateRequest::Read(bytes); });
  };
  // Every cut, and one word too many.
  for (size_t size = 0; size < good.size(); ++size) {
    RESOUND_CHECK(refused(std::vector<std::byte>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(size))));
  }
  std::vector<std::byte> longer = good;
  longer.resize(good.size() + 8);
  RESOUND_CHECK(refused(longer));
  // Counts that do not match the size, huge ones included (no overflow).
  const auto with_word = [&](size_t at, uint64_t value, size_t bytes) {
    std::vector<std::byte> changed = good;
    std::memcpy(changed.data() + at, &value, bytes);
    return changed;
  };
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (const uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{3}, kMax, kMax / 16 + 1}) {
    RESOUND_CHECK(refused(with_word(8, count, 8)));  // updates (2 is right)
  }
  for (const uint64_t count : {uint64_t{0}, uint64_t{2}, kMax, kMax / 8 + 1}) {
    RESOUND_CHECK(refused(with_word(16, count, 8)));  // deletes (1 is right)
  }
  RESOUND_CHECK(refused(with_word(4, 1, 4)));  // the reserved word
  RESOUND_CHECK(refused(with_word(0, 9, 4)));  // a name past its padding
  RESOUND_CHECK(refused(with_word(0, PackedMutateRequest::kMaxTableBytes + 1, 4)));
  RESOUND_CHECK(refused(with_word(0, 0xFFFFFFFF, 4)));
  // The writer's side refuses what it cannot write.
  RESOUND_CHECK(Throws<InvalidArgumentError>(
      [] { PackedMutateRequest::Bytes(std::string(PackedMutateRequest::kMaxTableBytes + 1, 'x'), 0, 0); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>(
      [] { PackedMutateRequest::Bytes("t", std::numeric_limits<size_t>::max() / 8, 0); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>(
      [] { PackedMutateRequest::Bytes("t", 1, std::numeric_limits<size_t>::max() / 8); }));
}

}  // namespace
}  // namespace resound::local

int main() {
  resound::local::RoundTrips();
  resound::local::RefusesWhatDoesNotAddUp();
  return 0;
}

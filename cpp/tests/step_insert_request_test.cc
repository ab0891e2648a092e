// The same-host transport's step insert request (client.insert): what the
// client writes, the server reads back whole; every cut, padded or
// miscounted request (a client's bytes) and every field whose payload does
// not match its dtype and shape is refused without reading past its end.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "resound/errors.h"
#include "resound/local/fixed_fields.h"
#include "resound/local/step_insert_request.h"

namespace resound::local {
namespace {

// A written request, split as the server sees it: the message, the data tail.
struct Written {
  std::vector<std::byte> message;
  std::vector<std::byte> data;
};

Written Write(const StepInsertRequest& request) {
  std::vector<std::byte> out(request.bytes());
  request.Write(out);
  const auto message_bytes = GetField<uint64_t>(out.data(), 0);
  RESOUND_CHECK(message_bytes % 8 == 0 && message_bytes <= out.size() - 8);  // every part 8-byte aligned
  const auto message_end = out.begin() + 8 + static_cast<std::ptrdiff_t>(message_bytes);
  return {{out.begin() + 8, message_end}, {message_end, out.end()}};
}

const std::vector<float> kObs = {0.5F, 1.5F, 2.5F, 3.5F, 4.5F, 5.5F};
const int64_t kAction = -3;
const std::vector<char> kNoBytes;

StepInsertRequest Example(std::string table = "replay") {
  return StepInsertRequest({{.key = 11, .dtype = DType::Parse("<f4"), .shape = {2, 3},
                             .data = std::as_bytes(std::span(kObs))},
                            {.key = std::numeric_limits<uint64_t>::max(), .dtype = DType::Parse("<i8"), .shape = {},
                             .data = std::as_bytes(std::span(&kAction, 1))},
                            {.key = 12, .dtype = DType::Parse("|u1"), .shape = {0, 4},
                             .data = std::as_bytes(std::span(kNoBytes))}},
                           /*episode_id=*/77, {{table, 7, 1.5}, {"other", 8, 0.0}, {table, 9, 1e300}});
}

void RoundTrips() {
  for (const std::string& table :
       std::vector<std::string>{"", "t", "replay table", std::string(StepInsertRequest::kMaxTableBytes, 'x')}) {
    const Written written = Write(Example(table));
    const StepInsertRequest read = StepInsertRequest::Read(written.message, written.data);
    RESOUND_CHECK(read.episode_id() == 77 && read.fields().size() == 3 && read.items().size() == 3);
    const auto& obs = read.fields()[0];
    RESOUND_CHECK(obs.key == 11 && obs.dtype == DType::Parse("<f4") && (obs.shape == std::vector<int64_t>{2, 3}));
    RESOUND_CHECK(obs.data.size() == kObs.size() * sizeof(float) &&
                  std::memcmp(obs.data.data(), kObs.data(), obs.data.size()) == 0);
    const auto& action = read.fields()[1];
    RESOUND_CHECK(action.key == std::numeric_limits<uint64_t>::max() && action.shape.empty() &&
                  action.data.size() == sizeof kAction &&
                  std::memcmp(action.data.data(), &kAction, sizeof kAction) == 0);
    RESOUND_CHECK(read.fields()[2].data.empty() && (read.fields()[2].shape == std::vector<int64_t>{0, 4}));
    RESOUND_CHECK(read.items()[0].table == table && read.items()[0].key == 7 && read.items()[0].priority == 1.5);
    RESOUND_CHECK(read.items()[1].table == "other" && read.items()[2].priority == 1e300);
    const ChunkMetadata chunk = read.ChunkOf(0);
    RESOUND_CHECK(chunk.key == 11 && chunk.num_steps == 1 && chunk.episode_id == 77 &&
                  chunk.uncompressed_size == static_cast<int64_t>(kObs.size() * sizeof(float)));
  }
}

void RefusesWhatDoesNotAddUp() {
  const Written good = Write(Example());
  const auto refused = [](const std::vector<std::byte>& message, const std::vector<std::byte>& data) {
    return Throws<InvalidArgumentError>([&] { StepInsertRequest::Read(message, data); });
  };
  // Every cut of the message, and a word too many; a data tail one byte
  // short or long.
  for (size_t size = 0; size < good.message.size(); ++size) {
    RESOUND_CHECK(refused({good.message.begin(), good.message.begin() + static_cast<std::ptrdiff_t>(size)},
                          good.data));
  }
  std::vector<std::byte> longer = good.message;
  longer.resize(longer.size() + 8);
  RESOUND_CHECK(refused(longer, good.data));
  RESOUND_CHECK(refused(good.message, {good.data.begin(), good.data.end() - 1}));
  std::vector<std::byte> more_data = good.data;
  more_data.push_back(std::byte{0});
  RESOUND_CHECK(refused(good.message, more_data));

  const auto with_word = [&](size_t at, uint64_t value, size_t bytes) {
    std::vector<std::byte> changed = good.message;
    std::memcpy(changed.data() + at, &value, bytes);
    return changed;
  };
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  // Counts of fields and items (3 is right for each), huge ones included.
  for (const uint64_t count : {uint64_t{0}, uint64_t{2}, uint64_t{4}, uint64_t{0xFFFFFFFF}}) {
    RESOUND_CHECK(refused(with_word(8, count, 4), good.data));
    RESOUND_CHECK(refused(with_word(12, count, 4), good.data));
  }
  constexpr size_t kField = 16;  // the first field's record
  // Its payload's size: too small or large for its shape, past the data.
  for (const uint64_t bytes : {uint64_t{0}, uint64_t{23}, uint64_t{28}, kMax}) {
    RESOUND_CHECK(refused(with_word(kField + 8, bytes, 8), good.data));
  }
  // Its dtype: unknown, of a size numpy has no type of, not zero-padded.
  RESOUND_CHECK(refused(with_word(kField + 16, 0x00347A3C, 4), good.data));  // "<z4"
  RESOUND_CHECK(refused(with_word(kField + 16, 0x0033663C, 4), good.data));  // "<f3"
  std::vector<std::byte> no_zero = good.message;
  std::memset(no_zero.data() + kField + 16, 'f', 16);
  RESOUND_CHECK(refused(no_zero, good.data));
  RESOUND_CHECK(refused(with_word(kField + 16 + 15, 0x41, 1), good.data));  // a character after the zero
  // Its dimensions (2 is right), and the reserved word.
  for (const uint64_t dimensions : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{65}, uint64_t{0xFFFFFFFF}}) {
    RESOUND_CHECK(refused(with_word(kField + 32, dimensions, 4), good.data));
  }
  RESOUND_CHECK(refused(with_word(kField + 36, 1, 4), good.data));
  // A negative dimension (the shapes follow the three field records).
  constexpr size_t kShapes = kField + 3 * 40;
  RESOUND_CHECK(refused(with_word(kShapes, static_cast<uint64_t>(-2), 8), good.data));
  // The first item: a name past its padding or too long, the reserved word.
  // (Its priority is the table's to check: CheckReceivedItem.)
  constexpr size_t kItem = kShapes + 4 * 8;
  RESOUND_CHECK(refused(with_word(kItem + 16, 9, 4), good.data));
  RESOUND_CHECK(refused(with_word(kItem + 16, StepInsertRequest::kMaxTableBytes + 1, 4), good.data));
  RESOUND_CHECK(refused(with_word(kItem + 16, 0xFFFFFFFF, 4), good.data));
  RESOUND_CHECK(refused(with_word(kItem + 20, 1, 4), good.data));

  // The writer's side refuses what it cannot write.
  RESOUND_CHECK(Throws<InvalidArgumentError>([] { StepInsertRequest({}, 0, {{"t", 1, 1.0}}); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([] {
    StepInsertRequest({{.key = 1, .dtype = DType::Parse("<f4"), .shape = {6}, .data = std::as_bytes(std::span(kObs))}},
                      0, {});
  }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([] {
    StepInsertRequest({{.key = 1, .dtype = DType::Parse("<f4"), .shape = {7}, .data = std::as_bytes(std::span(kObs))}},
                      0, {{"t", 1, 1.0}});
  }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([] {
    StepInsertRequest({{.key = 1, .dtype = DType::Parse("<f4"), .shape = std::vector<int64_t>(65, 1),
                        .data = std::as_bytes(std::span(kObs)).first(4)}},
                      0, {{"t", 1, 1.0}});
  }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([] { Example(std::string(StepInsertRequest::kMaxTableBytes + 1, 'x')); }));
}

}  // namespace
}  // namespace resound::local

int main() {
  resound::local::RoundTrips();
  resound::local::RefusesWhatDoesNotAddUp();
  return 0;
}

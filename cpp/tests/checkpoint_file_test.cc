// Checkpoint files: CRC-32C against published check values; records round
// trip; nothing appears under the file's name before Commit (nor after a
// failed one); and every truncation and every single-bit flip of a real file
// is refused with DataLossError (never a crash, a hang or a wrong record).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "check.h"
#include "test_files.h"
#include "resound/checkpoint_file_reader.h"
#include "resound/checkpoint_file_writer.h"
#include "resound/crc32c.h"
#include "resound/errors.h"

namespace resound {
namespace {

using test_files::Contents;
using test_files::Store;

std::span<const std::byte> Bytes(const std::string& text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

struct Record {
  uint32_t type;
  std::string payload;
};

std::vector<Record> ReadAll(const std::string& path) {
  CheckpointFileReader reader(path);
  std::vector<Record> records;
  uint32_t type = 0;
  std::vector<std::byte> payload;
  while (reader.Next(type, payload)) {
    records.push_back({type, std::string(reinterpret_cast<const char*>(payload.data()), payload.size())});
  }
  RESOUND_CHECK(!reader.Next(type, payload));  // stays ended
  return records;
}

void Crc32cMatchesCheckValues() {
  RESOUND_CHECK(Crc32c(0, Bytes("123456789")) == 0xE3069283u);
  RESOUND_CHECK(Crc32c(0, Bytes(std::string(32, '\0'))) == 0x8A9136AAu);
  RESOUND_CHECK(Crc32c(0, Bytes(std::string(32, '\xff'))) == 0x62A8AB43u);
  RESOUND_CHECK(Crc32c(0, {}) == 0);
  // In parts, cut anywhere: the same as at once (covers the 8-byte steps
  // and the bytes after them).
  std::string text;
  for (int i = 0; i < 100; ++i) text += static_cast<char>(i * 37 + 11);
  const uint32_t whole = Crc32c(0, Bytes(text));
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    RESOUND_CHECK(Crc32c(Crc32c(0, Bytes(text.substr(0, cut))), Bytes(text.substr(cut))) == whole);
  }
}

std::string WriteSample(const std::string& path) {
  std::remove(path.c_str());
  const std::string big(3 << 20, 'x');  // larger than the writer's buffer
  {
    CheckpointFileWriter writer(path);
    writer.Append(1, {Bytes("table")});
    writer.Append(2, {Bytes("chunk head:"), Bytes("payload")});
    writer.Append(3, {});
    writer.Append(2, {Bytes("big:"), Bytes(big)});
    writer.Append(7, {Bytes("last")});
    RESOUND_CHECK(!Exists(path));  // only the temporary file so far
    RESOUND_CHECK(Exists(writer.temporary_path()));
    // Named with the writer's pid: recognisable once its process is gone.
    RESOUND_CHECK(writer.temporary_path() == path + "." + std::to_string(::getpid()) + ".tmp");
    writer.Commit();
    RESOUND_CHECK(!Exists(writer.temporary_path()));
    RESOUND_CHECK(writer.num_records() == 5);
  }
  return big;
}

void RoundTrip(const std::string& directory) {
  const std::string path = directory + "/round-trip.ckpt";
  const std::string big = WriteSample(path);
  const auto records = ReadAll(path);
  RESOUND_CHECK(records.size() == 5);
  RESOUND_CHECK(records[0].type == 1 && records[0].payload == "table");
  RESOUND_CHECK(records[1].type == 2 && records[1].payload == "chunk head:payload");
  RESOUND_CHECK(records[2].type == 3 && records[2].payload.empty());
  RESOUND_CHECK(records[3].type == 2 && records[3].payload == "big:" + big);
  RESOUND_CHECK(records[4].type == 7 && records[4].payload == "last");
  std::remove(path.c_str());
}

void UncommittedWritersLeaveNothing(const std::string& directory) {
  const std::string path = directory + "/uncommitted.ckpt";
  {
    CheckpointFileWriter writer(path);
    writer.Append(1, {Bytes("abandoned")});
  }
  RESOUND_CHECK(!Exists(path));
  RESOUND_CHECK(!Exists(CheckpointFileWriter::TemporaryPathOf(path)));
}

void CommitNeverReplacesAFile(const std::string& directory) {
  const std::string path = directory + "/taken.ckpt";
  Store(path, {'m', 'i', 'n', 'e'});
  {
    CheckpointFileWriter writer(path);
    writer.Append(1, {Bytes("x")});
    RESOUND_CHECK(Throws<std::system_error>([&] { writer.Commit(); }));
  }
  RESOUND_CHECK((Contents(path) == std::vector<char>{'m', 'i', 'n', 'e'}));
  RESOUND_CHECK(!Exists(CheckpointFileWriter::TemporaryPathOf(path)));
  std::remove(path.c_str());
}

bool Refused(const std::string& path) {
  try {
    ReadAll(path);
  } catch (const DataLossError& error) {
    RESOUND_CHECK(std::string(error.what()).find(path) != std::string::npos);  // names the file
    return true;
  }
  return false;
}

void DamagedFilesAreRefused(const std::string& directory) {
  // A small file, so that every prefix and every bit can be tried.
  const std::string path = directory + "/small.ckpt";
  std::remove(path.c_str());
  {
    CheckpointFileWriter writer(path);
    writer.Append(1, {Bytes("table config")});
    writer.Append(2, {Bytes("chunk"), Bytes(std::string(40, 'c'))});
    writer.Append(3, {Bytes("item")});
    writer.Commit();
  }
  const std::vector<char> good = Contents(path);
  RESOUND_CHECK(ReadAll(path).size() == 3);
  const std::string damaged = directory + "/damaged.ckpt";
  for (size_t length = 0; length < good.size(); ++length) {
    Store(damaged, {good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length)});
    RESOUND_CHECK(Refused(damaged));
  }
  for (size_t position = 0; position < good.size(); ++position) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<char> flipped = good;
      flipped[position] = static_cast<char>(flipped[position] ^ (1 << bit));
      Store(damaged, flipped);
      RESOUND_CHECK(Refused(damaged));
    }
  }
  // A newer format version (with a consistent header) is named in the error.
  std::vector<char> newer = good;
  newer[8] = 2;
  const uint32_t header_crc = Crc32c(0, {reinterpret_cast<const std::byte*>(newer.data()), 12});
  std::memcpy(newer.data() + 12, &header_crc, 4);
  Store(damaged, newer);
  try {
    ReadAll(damaged);
    RESOUND_CHECK(false);
  } catch (const DataLossError& error) {
    RESOUND_CHECK(std::string(error.what()).find("format version 2") != std::string::npos);
  }
  std::vector<char> longer = good;
  longer.push_back('!');
  Store(damaged, longer);
  RESOUND_CHECK(Refused(damaged));
  Store(damaged, {'n', 'o', 't', ' ', 'a', ' ', 'c', 'h', 'e', 'c', 'k', 'p', 'o', 'i', 'n', 't', '\n'});
  RESOUND_CHECK(Refused(damaged));
  RESOUND_CHECK(Throws<std::system_error>([&] { CheckpointFileReader reader(directory + "/missing.ckpt"); }));
  std::remove(damaged.c_str());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace resound

int main() {
  const resound::test_files::TempDirectory temporary;
  const std::string& directory = temporary.path();
  resound::Crc32cMatchesCheckValues();
  resound::RoundTrip(directory);
  resound::UncommittedWritersLeaveNothing(directory);
  resound::CommitNeverReplacesAFile(directory);
  resound::DamagedFilesAreRefused(directory);
  return 0;
}

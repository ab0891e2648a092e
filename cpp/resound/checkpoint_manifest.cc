#include "resound/checkpoint_manifest.h"

#include <set>
#include <span>
#include <utility>

#include "resound/checkpoint_file_reader.h"
#include "resound/checkpoint_file_writer.h"
#include "resound/checkpoint_record_decoder.h"
#include "resound/checkpoint_record_encoder.h"
#include "resound/errors.h"

namespace resound {
namespace {

constexpr std::string_view kTablePrefix = "tables-";
constexpr std::string_view kTableSuffix = ".rsnd";

}  // namespace

std::optional<CheckpointManifest> CheckpointManifest::Read(const std::string& path) {
  CheckpointFileReader reader(path);
  CheckpointManifest manifest;
  std::set<std::string> files;
  std::set<std::string> tables;
  uint32_t type = 0;
  std::vector<std::byte> payload;
  while (reader.Next(type, payload)) {
    const uint64_t index = reader.num_records() - 1;
    if (type != kFileRecord) {
      if (index == 0) return std::nullopt;  // a table file
      throw DataLossError("checkpoint " + path + " cannot be loaded: record " + std::to_string(index) +
                          ": a record of type " + std::to_string(type) + " in a manifest");
    }
    CheckpointRecordDecoder in(payload, path, index);
    Entry entry;
    entry.file = in.GetString("file name");
    if (!IsTableFileName(entry.file)) in.Fail("file name '" + entry.file + "' is not tables-<k>.rsnd");
    if (!files.insert(entry.file).second) in.Fail("file '" + entry.file + "' is named twice");
    const auto count = in.Get<uint32_t>("number of tables");
    if (count == 0) in.Fail("file '" + entry.file + "' holds no table");
    for (uint32_t t = 0; t < count; ++t) {
      entry.tables.push_back(in.GetString("table name"));
      if (!tables.insert(entry.tables.back()).second) in.Fail("table '" + entry.tables.back() + "' is named twice");
    }
    in.Finish();
    manifest.entries.push_back(std::move(entry));
  }
  if (manifest.entries.empty()) return std::nullopt;  // no records: a checkpoint of no tables either way
  manifest.file_bytes = reader.file_bytes();
  return manifest;
}

uint64_t CheckpointManifest::Write(CheckpointFileWriter& writer, const std::vector<Entry>& entries) {
  for (const Entry& entry : entries) {
    CheckpointRecordEncoder record;
    record.PutString(entry.file).Put<uint32_t>(static_cast<uint32_t>(entry.tables.size()));
    for (const std::string& table : entry.tables) record.PutString(table);
    writer.Append(kFileRecord, {record.bytes()});
  }
  writer.Commit();
  return writer.bytes_written();
}

std::string CheckpointManifest::TableFileName(size_t index) {
  return std::string(kTablePrefix) + std::to_string(index) + std::string(kTableSuffix);
}

bool CheckpointManifest::IsTableFileName(std::string_view name) noexcept {
  if (name.size() <= kTablePrefix.size() + kTableSuffix.size() || !name.starts_with(kTablePrefix) ||
      !name.ends_with(kTableSuffix)) {
    return false;
  }
  const std::string_view digits =
      name.substr(kTablePrefix.size(), name.size() - kTablePrefix.size() - kTableSuffix.size());
  if (digits.size() > 9 || (digits.size() > 1 && digits.front() == '0')) return false;
  for (const char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string CheckpointManifest::Beside(const std::string& manifest_path, const std::string& file) {
  const size_t slash = manifest_path.rfind('/');
  return slash == std::string::npos ? file : manifest_path.substr(0, slash + 1) + file;
}

}  // namespace resound

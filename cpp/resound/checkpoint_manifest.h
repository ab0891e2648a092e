// The manifest of a checkpoint directory (docs/checkpoint-format.md): a
// checkpoint file whose records are all FILE records, each naming one table
// file of the directory (tables-<k>.rsnd) and the tables it holds, in order.
//
// Tables that share no chunk go into files of their own, so that a periodic
// checkpoint can link the file of tables that did not change from the
// previous checkpoint instead of writing them again. The manifest is written
// last: a directory whose manifest is complete is a complete checkpoint.
//
// A checkpoint file whose first record is not a FILE record is a table file
// (or a checkpoint of the earlier one-file layout): Read tells the two apart.
#ifndef RESOUND_CHECKPOINT_MANIFEST_H_
#define RESOUND_CHECKPOINT_MANIFEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace resound {

class CheckpointFileWriter;

class CheckpointManifest {
 public:
  // Its record type, beside the table files' TABLE (1), CHUNK (2), ITEM (3).
  static constexpr uint32_t kFileRecord = 4;

  struct Entry {
    std::string file;                 // a name in the manifest's directory
    std::vector<std::string> tables;  // the tables it holds, in its order
  };

  std::vector<Entry> entries;
  uint64_t file_bytes = 0;  // the manifest's own size

  // The manifest at `path`, or std::nullopt if `path` is a checkpoint file
  // of another kind (its first record is not a FILE record). DataLossError
  // for a damaged manifest: a record of another type after a FILE record,
  // a file name that is not tables-<k>.rsnd (a name can never leave the
  // directory), a file or a table named twice, a file of no tables.
  // std::system_error if it cannot be read.
  static std::optional<CheckpointManifest> Read(const std::string& path);

  // Writes the manifest of `entries` through `writer` (opened on the
  // manifest's path before the table files were written, so that its
  // temporary marks the directory as being saved, by whom) and commits it;
  // returns its size in bytes.
  static uint64_t Write(CheckpointFileWriter& writer, const std::vector<Entry>& entries);

  // "tables-<index>.rsnd", the name of a directory's index-th table file.
  static std::string TableFileName(size_t index);
  static bool IsTableFileName(std::string_view name) noexcept;

  // `file` beside the manifest `manifest_path` (in its directory).
  static std::string Beside(const std::string& manifest_path, const std::string& file);
};

}  // namespace resound

#endif  // RESOUND_CHECKPOINT_MANIFEST_H_

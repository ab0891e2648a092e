// Saves the state of tables into one checkpoint file, or a checkpoint
// directory of table files and a manifest (CheckpointManifest), and restores
// either.
//
// File: a CheckpointFileWriter file (header, checksummed records, end
// record) whose records are, in order (docs/checkpoint-format.md):
//   1 TABLE  one per table: name, configuration, signature, limiter counters,
//            statistics and its number of items;
//   2 CHUNK  each chunk that an item uses, once however many items and tables
//            use it, always before the first item that needs it;
//   3 ITEM   each item of each table, tables in TABLE order and items in
//            insertion order: key, priority, times sampled, insertion time,
//            the selectors' tie order and the trajectory.
// Record payloads are fixed little-endian fields and length-prefixed strings.
//
// Saving takes only references under each table's lock (Table::Checkpoint),
// one table after another, and writes afterwards, outside every lock:
// inserts and samples go on during the save. Each table is consistent in
// itself (every item's chunks are in the file); tables are not captured at
// one instant together. The file appears only when complete.
#ifndef RESOUND_CHECKPOINT_H_
#define RESOUND_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "resound/rate_limiter.h"
#include "resound/table.h"
#include "resound/table_types.h"

namespace resound {

// What a checkpoint holds (or what a save wrote, or a load restored).
struct CheckpointSummary {
  struct TableSummary {
    TableConfig config;  // column_specs are not stored (the signature is)
    RateLimiterCounters counters;
    int64_t num_items = 0;
    int64_t num_deleted_episodes = 0;
    int64_t num_unique_samples = 0;
  };
  // One table file of a checkpoint directory (empty for a single file).
  struct FileSummary {
    std::string name;
    std::vector<std::string> tables;
    bool reused = false;  // linked from the previous checkpoint, not written
    uint64_t bytes = 0;
  };
  std::vector<TableSummary> tables;
  std::vector<FileSummary> files;
  int64_t num_chunks = 0;
  int64_t chunk_bytes = 0;  // payload bytes as stored (compressed or not)
  uint64_t file_bytes = 0;
};

class Checkpoint {
 public:
  Checkpoint() = delete;

  // Writes `tables` into a new file `path` (which must not exist).
  // std::system_error for I/O errors (no file appears then).
  static CheckpointSummary Save(const std::vector<Table*>& tables, const std::string& path);

  // Writes `tables` as a checkpoint directory into `directory` (which must
  // exist and hold none of its names): each group of tables that share no
  // chunk with the others in a table file of its own, then the manifest
  // `manifest_path` (CheckpointManifest), which appears last. A group whose
  // tables are all in `unchanged` and which the checkpoint directory
  // `previous` ("": none) holds in a file of exactly those tables is
  // hard-linked from there instead of written (written after all if the
  // link fails, e.g. across file systems, or that manifest cannot be read).
  // On an error nothing of it is left in `directory`.
  static CheckpointSummary SaveDirectory(const std::vector<Table*>& tables, const std::string& directory,
                                         const std::string& previous, const std::vector<std::string>& unchanged);

  // The name of a checkpoint directory's manifest, "checkpoint.rsnd".
  static constexpr const char* kManifestName = "checkpoint.rsnd";

  // Restores the checkpoint at `path` (a checkpoint file, or the manifest of
  // a checkpoint directory, whose table files are all read) into `tables`, matched by name; every
  // table in the file must be among them and empty, with the same sampler,
  // remover, max_times_sampled and rate limiter (max_size may differ if the
  // items fit). Tables not in the file stay as they are. All or nothing: on
  // any error no table is changed. DataLossError for a damaged or foreign
  // file, InvalidArgumentError / FailedPreconditionError for a mismatch,
  // std::system_error if the file cannot be read. (Where the checkpoint's
  // configuration should win, the caller first builds tables configured as
  // ReadTables reports and loads into those.)
  static CheckpointSummary Load(const std::string& path, const std::vector<Table*>& tables);

  // Reads only the TABLE records at the start of the file (of every file a
  // manifest names) (each checksummed,
  // names unique): every saved table's configuration, counters and number
  // of items, without reading any chunk. Same errors as Inspect.
  static CheckpointSummary ReadTables(const std::string& path);

  // Reads and checks the whole file without restoring anything.
  static CheckpointSummary Inspect(const std::string& path);
};

}  // namespace resound

#endif  // RESOUND_CHECKPOINT_H_

// The payloads of a table file's records (docs/checkpoint-format.md):
// TABLE (a table's configuration, counters and number of items), CHUNK (a
// chunk's metadata and stored payload) and ITEM (an item's key, priority,
// statistics, tie orders and trajectory). Readers validate every field (a
// DataLossError through the decoder names the file and the record); which
// records go into which file, and in what order, is Checkpoint's business.
#ifndef RESOUND_CHECKPOINT_RECORDS_H_
#define RESOUND_CHECKPOINT_RECORDS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "resound/checkpoint.h"
#include "resound/checkpoint_record_decoder.h"
#include "resound/checkpoint_record_encoder.h"
#include "resound/chunk.h"
#include "resound/table_types.h"
#include "resound/trajectory.h"

namespace resound {

class CheckpointRecords {
 public:
  CheckpointRecords() = delete;

  // Record types (a manifest's FILE records are CheckpointManifest's).
  enum Type : uint32_t { kTable = 1, kChunk = 2, kItem = 3 };

  // An ITEM record as read: the entry without its item, which the reader
  // builds from `trajectory` once the chunks are in a store.
  struct Item {
    uint32_t table = 0;
    uint64_t key = 0;
    TableState::Entry entry;
    Trajectory trajectory;
  };

  static void PutTable(CheckpointRecordEncoder& out, const TableConfig& config, const TableState& state);
  static CheckpointSummary::TableSummary GetTable(CheckpointRecordDecoder& in);
  // The chunk's metadata; its payload follows as a second part of the record.
  static void PutChunkHead(CheckpointRecordEncoder& out, const Chunk& chunk);
  // The chunk's metadata and its payload (the rest of the record), validated.
  static std::pair<ChunkMetadata, std::span<const std::byte>> GetChunk(CheckpointRecordDecoder& in);
  static void PutItem(CheckpointRecordEncoder& out, uint32_t table, const TableState::Entry& entry);
  // `record_bytes` bounds the counts a damaged record may claim.
  static Item GetItem(CheckpointRecordDecoder& in, size_t record_bytes);
};

}  // namespace resound

#endif  // RESOUND_CHECKPOINT_RECORDS_H_

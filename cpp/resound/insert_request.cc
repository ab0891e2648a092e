#include "resound/insert_request.h"

#include <cmath>
#include <string>
#include <utility>

#include "resound/errors.h"
#include "resound/proto_reader.h"

namespace resound {
namespace {

// The one value of a message field that must not repeat (repeated message
// fields would merge; the service's clients never send them twice).
std::span<const uint8_t> Single(const std::vector<std::span<const uint8_t>>& parts, const char* name) {
  if (parts.size() > 1) throw InvalidArgumentError(std::string("malformed InsertRequest: ") + name + " must come once");
  return parts.empty() ? std::span<const uint8_t>() : parts.front();
}

}  // namespace

std::vector<TableRun> RunsOf(std::span<const uint32_t> table_indices) {
  std::vector<TableRun> runs;
  for (size_t i = 0; i < table_indices.size(); ++i) {
    if (runs.empty() || table_indices[i] != runs.back().table) {
      runs.push_back({table_indices[i], i, i + 1});
    } else {
      runs.back().end = i + 1;
    }
  }
  return runs;
}

InsertRequestMessage ReadInsertRequest(std::span<const uint8_t> message) {
  namespace f = wire::insert_request;
  // Fields may come in any order; chunk_data is the last one, as protobuf
  // keeps it.
  std::vector<std::span<const uint8_t>> chunk_parts, item_parts, trajectory_parts;
  InsertRequestMessage out;
  ProtoReader reader(message, "InsertRequest");
  while (reader.Next()) {
    switch (reader.field()) {
      case f::kChunks:
        chunk_parts.push_back(reader.bytes());
        break;
      case f::kItems:
        item_parts.push_back(reader.bytes());
        break;
      case f::kReleaseChunkKeys:
        reader.AppendVarints(out.release_chunk_keys);
        break;
      case f::kChunkData:
        out.chunk_data = std::as_bytes(reader.bytes());
        break;
      default:
        break;  // unknown fields are skipped, as protobuf does
    }
  }
  out.chunks = wire::ReadChunkBatch(ProtoReader(Single(chunk_parts, "chunks"), "InsertRequest.chunks"));

  namespace g = wire::item_batch;
  std::vector<uint32_t> table_indices;
  ProtoReader items(Single(item_parts, "items"), "InsertRequest.items");
  while (items.Next()) {
    switch (items.field()) {
      case g::kTables:
        out.tables.push_back(items.string());
        break;
      case g::kTableIndices:
        items.AppendVarints(table_indices);
        break;
      case g::kKeys:
        items.AppendVarints(out.keys);
        break;
      case g::kPriorities:
        items.AppendDoubles(out.priorities);
        break;
      case g::kTrajectories:
        trajectory_parts.push_back(items.bytes());
        break;
      default:
        break;
    }
  }
  const size_t count = out.keys.size();
  if (table_indices.size() != count || out.priorities.size() != count) {
    throw InvalidArgumentError("items: " + std::to_string(count) + " keys, " + std::to_string(table_indices.size()) +
                               " table_indices and " + std::to_string(out.priorities.size()) +
                               " priorities; they must pair up");
  }
  for (const uint32_t index : table_indices) {
    if (index >= out.tables.size()) {
      throw InvalidArgumentError("items: table index " + std::to_string(index) + " is not below the " +
                                 std::to_string(out.tables.size()) + " tables");
    }
  }
  if (count > 0 || !trajectory_parts.empty()) {
    try {
      out.trajectories = wire::ReadTrajectories(ProtoReader(Single(trajectory_parts, "items.trajectories"), "trajectories"));
    } catch (const InvalidArgumentError& error) {
      throw InvalidArgumentError(std::string("items: ") + error.what());
    }
  }
  if (out.trajectories.size() != count) {
    throw InvalidArgumentError("items: " + std::to_string(count) + " keys but " +
                               std::to_string(out.trajectories.size()) + " trajectories");
  }
  out.runs = RunsOf(table_indices);
  return out;
}

void CheckReceivedItem(const ItemRequest& request) {
  if (request.trajectory.empty()) {
    throw InvalidArgumentError("item " + std::to_string(request.key) + " has no columns");
  }
  if (!std::isfinite(request.priority)) {
    throw InvalidArgumentError("item " + std::to_string(request.key) + ": priority must be finite, got " +
                               std::to_string(request.priority));
  }
}

std::vector<ItemRequest> ReceivedItemRequests(std::span<const uint64_t> keys, std::span<const double> priorities,
                                              const PackedTrajectories& trajectories, const ChunkHolder& holder,
                                              size_t begin, size_t end) {
  if (keys.size() != trajectories.size() || priorities.size() != trajectories.size()) {
    throw InvalidArgumentError("keys (" + std::to_string(keys.size()) + "), priorities (" +
                               std::to_string(priorities.size()) + ") and trajectories (" +
                               std::to_string(trajectories.size()) + ") must have one entry per item");
  }
  if (begin > end || end > trajectories.size()) throw InvalidArgumentError("insert_packed: bad range");
  std::vector<ItemRequest> requests;
  requests.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) {
    ItemRequest request{keys[i], priorities[i], trajectories.Get(i)};
    CheckReceivedItem(request);
    holder.CheckHolds(request.key, request.trajectory);
    requests.push_back(std::move(request));
  }
  return requests;
}

}  // namespace resound

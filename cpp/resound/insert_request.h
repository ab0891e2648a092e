// InsertRequest messages (protos/resound/v1/replay.proto) read by the server
// in C++. The client writes them in C++ (insert_request_encoder.h); reading
// them through the protobuf runtime and numpy cost the server about 300 us of
// Python per message, more than gRPC's own work for a one-item round trip.
//
// The message comes from the network: every array is checked against the
// others before anything is stored, and InvalidArgumentError names the first
// problem ("items: 2 keys, 2 table_indices and 1 priorities; ...").
#ifndef RESOUND_INSERT_REQUEST_H_
#define RESOUND_INSERT_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "resound/chunk_holder.h"
#include "resound/packed_trajectories.h"
#include "resound/table_types.h"
#include "resound/wire_messages.h"

namespace resound {

// Items [begin, end) of a request, all for tables[table]: each run goes into
// its table with one core call.
struct TableRun {
  size_t table = 0;
  size_t begin = 0;
  size_t end = 0;
};

// The runs of consecutive items of one table, given each item's table index.
std::vector<TableRun> RunsOf(std::span<const uint32_t> table_indices);

// A request as read. `chunk_data` points into the message it was read from,
// which must outlive it.
struct InsertRequestMessage {
  wire::ChunkBatchMessage chunks;
  std::span<const std::byte> chunk_data;
  std::vector<std::string> tables;
  std::vector<uint64_t> keys;
  std::vector<double> priorities;
  PackedTrajectories trajectories;
  std::vector<TableRun> runs;  // in item order, covering every item
  std::vector<uint64_t> release_chunk_keys;
};

// Reads a serialized InsertRequest and checks that its items pair up (keys,
// table indices, priorities and trajectories, each table index naming one
// of `tables`). The chunks are checked when they are made (wire::MakeChunks),
// the items' slices when they go in (Table::InsertPacked).
InsertRequestMessage ReadInsertRequest(std::span<const uint8_t> message);

// Checks an item a client sent as a server does: it has columns and a finite
// priority; InvalidArgumentError naming the item otherwise.
void CheckReceivedItem(const ItemRequest& request);

// Items [begin, end) of a received batch as requests for Table::Prepare,
// each checked as a server checks what a client sent (CheckReceivedItem),
// and every chunk it uses one `holder` holds (its stream sent it);
// InvalidArgumentError naming the item otherwise.
std::vector<ItemRequest> ReceivedItemRequests(std::span<const uint64_t> keys, std::span<const double> priorities,
                                              const PackedTrajectories& trajectories, const ChunkHolder& holder,
                                              size_t begin, size_t end);

}  // namespace resound

#endif  // RESOUND_INSERT_REQUEST_H_

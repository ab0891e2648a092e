// The Replay service (protos/resound/v1/replay.proto) as the local transport
// serves it: the same request and response messages as over gRPC, in the
// connection's shared memory, handled here in C++ on the connection's
// thread for the calls that carry data (Insert, Sample, SampleStream) and
// handed to the Python servicer (`fallback`, which takes the GIL) for the
// rest, whose cost is the server's own work, not the transport's.
// MutatePriorities too is answered here: a learner sends it after nearly
// every batch, and the fallback's hop to the server's event loop cost it
// more than the call itself.
//
// Insert keeps, per connection, the chunks its client sent and did not
// release (as a gRPC Insert stream does); a connection that ends drops them.
// A request that a rate limiter holds up is confirmed in parts: the part that
// went in is answered with `more`, and the client's Continue waits for the
// rest, in slices that give up when the client hangs up or the server stops.
#ifndef RESOUND_LOCAL_REPLAY_LOCAL_SERVICE_H_
#define RESOUND_LOCAL_REPLAY_LOCAL_SERVICE_H_

#include <cstdint>
#include <functional>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "resound/chunk_store.h"
#include "resound/local/local_service.h"
#include "resound/table.h"

namespace resound::local {

// The calls by number (docs/local-transport.md).
enum ReplayMethod : uint32_t {
  kInsert = 1,
  kSample = 2,        // a timeout is a DEADLINE_EXCEEDED error
  kSampleStream = 3,  // a timeout is a timed_out response (the stream goes on)
  kMutatePriorities = 4,
  kReset = 5,
  kServerInfo = 6,
  kWhyBlocked = 7,
  kCheckpoint = 8,
  // As SampleStream (a timeout is a timed_out response), answered with
  // gathered parts (resound/local/gathered_batch.h) when every column of
  // the batch stacks, with SampleResponses otherwise.
  kSampleGathered = 9,
  // SampleGathered into the client's batch region: the request is a
  // BatchRegionRequest prefix (slot, region bytes; the region's descriptor
  // attached when the slot gets a new one) and a SampleRequest. The batch
  // goes into the region when it fits there, else as SampleGathered's.
  kSampleInto = 10,
  // MutatePriorities with a PackedMutateRequest (resound/local/
  // packed_mutate_request.h), answered with a MutatePrioritiesResponse.
  kMutatePrioritiesPacked = 11,
  // client.insert's one step as a StepInsertRequest (resound/local/
  // step_insert_request.h), answered with InsertResponses as kInsert.
  kInsertStep = 12,
};

// What precedes the SampleRequest of a SampleInto request.
struct BatchRegionRequest {
  static constexpr size_t kBytes = 16;  // u32 slot, u32 reserved (0), u64 region bytes
  static constexpr uint32_t kSlots = 4;  // batch regions per connection
  uint32_t slot = 0;
  uint64_t region_bytes = 0;
};

class ReplayLocalService final : public LocalService {
 public:
  // Answers a call the service does not handle itself: the serialized
  // response, or a StatusError.
  using Fallback = std::function<std::string(uint32_t method, std::span<const std::byte> request)>;

  // `store` is the tables' chunk store; `max_bytes` (if set) bounds the
  // chunk bytes it may hold, as the server's max_bytes does over gRPC;
  // `max_batch_region_bytes` bounds the clients' batch regions that one
  // connection maps (a region past it is not used: the batch comes in the
  // download region instead).
  ReplayLocalService(std::shared_ptr<ChunkStore> store, std::optional<int64_t> max_bytes, Fallback fallback,
                     size_t max_batch_region_bytes = size_t{1} << 30);

  // The tables served, by name (replaced whole: a restore may swap them).
  void SetTables(std::map<std::string, std::shared_ptr<Table>> tables);

  std::unique_ptr<LocalSession> Open() override;

 private:
  class Session;
  class InsertProgress;
  friend class Session;
  friend class InsertProgress;

  std::shared_ptr<Table> Find(const std::string& name) const;

  const std::shared_ptr<ChunkStore> store_;
  const std::optional<int64_t> max_bytes_;
  const Fallback fallback_;
  const size_t max_batch_region_bytes_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Table>> tables_;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_REPLAY_LOCAL_SERVICE_H_

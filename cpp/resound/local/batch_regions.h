// A client connection's batch regions: shared memory the client creates and
// lends the server, which gathers sampled batches straight into it, so the
// arrays a learner gets are views of it and no byte is copied on this side
// (docs/local-transport.md, "Batch regions").
//
// A region is lent for one call at a time and only while nothing else holds
// it: the arrays of a batch hold its region (a shared_ptr), and a region is
// offered again only once they are all gone. With every slot held, or before
// the size of a batch is known, a call asks without a region and the batch
// comes through the connection's own region, copied once.
#ifndef RESOUND_LOCAL_BATCH_REGIONS_H_
#define RESOUND_LOCAL_BATCH_REGIONS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <algorithm>
#include <optional>

#include "resound/local/shared_memory.h"

namespace resound::local {

class BatchRegions {
 public:
  static constexpr uint32_t kSlots = 4;  // as BatchRegionRequest::kSlots
  // Regions are made at least this large, and in steps of it.
  static constexpr size_t kGranule = size_t{1} << 20;

  struct Lease {
    uint32_t slot = 0;
    std::shared_ptr<SharedMemory> region;
    bool send = false;  // the server does not have this region yet: attach its descriptor
  };

  // A region of at least `bytes` that nothing holds, made (or remade
  // larger) if need be; nullopt if every slot is held or `bytes` is 0 or
  // above `max_bytes`.
  std::optional<Lease> Take(size_t bytes, size_t max_bytes);
  // The server used the lease's region (it holds its descriptor now), or
  // did not (it will be sent again).
  void Used(const Lease& lease, bool by_server) noexcept;

  // What the last gathered batch took per sample (0: unknown yet): how large
  // a region the next call asks for.
  size_t bytes_per_sample() const noexcept { return bytes_per_sample_; }
  void set_bytes_per_sample(size_t bytes) noexcept { bytes_per_sample_ = bytes; }

 private:
  std::array<std::shared_ptr<SharedMemory>, kSlots> regions_;
  std::array<bool, kSlots> server_has_{};
  size_t bytes_per_sample_ = 0;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_BATCH_REGIONS_H_

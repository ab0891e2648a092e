// SampleResponse messages (protos/resound/v1/replay.proto) written by the
// server and read by the client, both in C++: a response carries hundreds of
// samples, and building or parsing it with the protobuf runtime cost the
// server more CPU per sample than the rest of the call (about 5 us of 4 KB
// samples' 20) and the client as much again.
//
// A response holds the info of samples [begin, end), their trajectories, and
// every chunk they use once, the payloads back to back in `chunk_data`, last:
// written straight from the chunks into the caller's buffer (one copy) and
// read from the received message into the client's store (one copy).
#ifndef RESOUND_SAMPLE_RESPONSE_H_
#define RESOUND_SAMPLE_RESPONSE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "resound/chunk_holder.h"
#include "resound/chunk_store.h"
#include "resound/packed_trajectories.h"
#include "resound/table_types.h"

namespace resound {

// Writes the response for samples [begin, end) into the buffer
// `allocate(size)` returns, and returns `end`: as many samples as fit
// `max_items` and `max_bytes` of chunk payload, at least one. `begin` must be
// below samples.size(). With `mark_end`, the response that reaches the last
// sample has end_of_request set (a SampleStream's answer to one request).
size_t WriteSampleResponse(std::span<const SampledItem> samples, size_t begin, size_t max_items, size_t max_bytes,
                           bool mark_end, const std::function<char*(size_t)>& allocate);

// A response as read: the samples' info and trajectories, whose chunks are now
// in the store and the holder that ReadSampleResponse was given.
struct SampleResponseItems {
  PackedTrajectories trajectories;
  std::vector<uint64_t> keys;
  std::vector<double> priorities;
  std::vector<int32_t> times_sampled;
  std::vector<double> probabilities;
  std::vector<int64_t> table_sizes;
  std::vector<uint8_t> rate_limited;  // bools
  // SampleStream's markers: the request's last response; its wait timed out.
  bool end_of_request = false;
  bool timed_out = false;
  std::string timeout_reason;  // why it timed out (empty from older servers)
};

// Reads a serialized SampleResponse, adding its chunks to `store` and
// `holder`. Throws InvalidArgumentError naming the problem if the message is
// malformed, its arrays do not pair up, or a trajectory uses a chunk that is
// not held (nothing is held then).
SampleResponseItems ReadSampleResponse(std::span<const uint8_t> message, ChunkStore& store, ChunkHolder& holder);

}  // namespace resound

#endif  // RESOUND_SAMPLE_RESPONSE_H_

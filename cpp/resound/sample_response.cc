#include "resound/sample_response.h"

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>

#include "resound/errors.h"
#include "resound/proto_reader.h"
#include "resound/proto_writer.h"
#include "resound/wire_messages.h"

namespace resound {
namespace {

template <typename T, typename Field>
std::vector<T> InfoField(std::span<const SampledItem> samples, Field field) {
  std::vector<T> values;
  values.reserve(samples.size());
  for (const SampledItem& sample : samples) values.push_back(static_cast<T>(field(sample)));
  return values;
}

void CheckCount(const char* name, size_t length, size_t expected) {
  if (length != expected) {
    throw InvalidArgumentError("SampleResponse.items: " + std::string(name) + " has " + std::to_string(length) +
                               " entries for " + std::to_string(expected) + " trajectories");
  }
}

// The one value of a message field that must not repeat (repeated message
// fields would merge; the service's servers never send them twice).
std::span<const uint8_t> Single(const std::vector<std::span<const uint8_t>>& parts, const char* name) {
  if (parts.size() > 1) throw InvalidArgumentError(std::string(name) + " must come once");
  return parts.empty() ? std::span<const uint8_t>() : parts.front();
}

}  // namespace

size_t WriteSampleResponse(std::span<const SampledItem> samples, size_t begin, size_t max_items, size_t max_bytes,
                           bool mark_end, const std::function<char*(size_t)>& allocate) {
  if (begin >= samples.size()) throw InvalidArgumentError("begin is past the last sample");
  PackedTrajectories packed;
  std::vector<const Chunk*> chunks;
  std::unordered_set<uint64_t> seen;
  size_t bytes = 0;
  size_t end = begin;
  for (; end < samples.size() && end - begin < std::max<size_t>(max_items, 1); ++end) {
    const Item& item = *samples[end].item;
    size_t new_bytes = 0;
    for (const auto& chunk : item.chunks()) {
      if (!seen.count(chunk->key())) new_bytes += chunk->data_size();
    }
    if (end > begin && bytes + new_bytes > max_bytes) break;
    bytes += new_bytes;
    packed.Append(item.trajectory());
    for (const auto& chunk : item.chunks()) {
      if (seen.insert(chunk->key()).second) chunks.push_back(chunk.get());
    }
  }
  const auto taken = samples.subspan(begin, end - begin);

  namespace f = wire::sampled_items;
  ProtoWriter items;
  items.PackedVarints(f::kKeys, InfoField<uint64_t>(taken, [](const SampledItem& s) { return s.item->key(); }));
  items.PackedDoubles(f::kPriorities, InfoField<double>(taken, [](const SampledItem& s) { return s.priority; }));
  items.PackedVarints(f::kTimesSampled,
                      InfoField<int64_t>(taken, [](const SampledItem& s) { return s.times_sampled; }));
  items.PackedDoubles(f::kProbabilities,
                      InfoField<double>(taken, [](const SampledItem& s) { return s.probability; }));
  items.PackedVarints(f::kTableSizes, InfoField<int64_t>(taken, [](const SampledItem& s) { return s.table_size; }));
  items.PackedVarints(f::kRateLimited,
                      InfoField<uint8_t>(taken, [](const SampledItem& s) { return s.rate_limited; }));
  wire::WriteTrajectories(items, f::kTrajectories, packed);

  ProtoWriter message;
  wire::WriteChunkBatch(message, wire::sample_response::kChunks, chunks);
  message.MessageField(wire::sample_response::kItems, items);
  if (mark_end && end == samples.size()) message.VarintField(wire::sample_response::kEndOfRequest, 1);
  wire::WriteWithPayloads(message, wire::sample_response::kChunkData, chunks, allocate);
  return end;
}

SampleResponseItems ReadSampleResponse(std::span<const uint8_t> message, ChunkStore& store, ChunkHolder& holder) {
  // Fields may come in any order; chunk_data is the last one, as protobuf
  // keeps it.
  std::vector<std::span<const uint8_t>> chunk_parts, item_parts, trajectory_parts;
  std::span<const uint8_t> payloads;
  SampleResponseItems out;
  ProtoReader reader(message, "SampleResponse");
  while (reader.Next()) {
    switch (reader.field()) {
      case wire::sample_response::kChunks:
        chunk_parts.push_back(reader.bytes());
        break;
      case wire::sample_response::kItems:
        item_parts.push_back(reader.bytes());
        break;
      case wire::sample_response::kChunkData:
        payloads = reader.bytes();
        break;
      case wire::sample_response::kEndOfRequest:
        out.end_of_request = reader.varint() != 0;
        break;
      case wire::sample_response::kTimedOut:
        out.timed_out = reader.varint() != 0;
        break;
      case wire::sample_response::kTimeoutReason: {
        const std::span<const uint8_t> text = reader.bytes();
        out.timeout_reason.assign(reinterpret_cast<const char*>(text.data()), text.size());
        break;
      }
      default:
        break;  // unknown fields are skipped, as protobuf does
    }
  }

  namespace f = wire::sampled_items;
  ProtoReader items(Single(item_parts, "SampleResponse.items"), "SampleResponse.items");
  while (items.Next()) {
    switch (items.field()) {
      case f::kKeys:
        items.AppendVarints(out.keys);
        break;
      case f::kPriorities:
        items.AppendDoubles(out.priorities);
        break;
      case f::kTimesSampled:
        items.AppendVarints(out.times_sampled);
        break;
      case f::kProbabilities:
        items.AppendDoubles(out.probabilities);
        break;
      case f::kTableSizes:
        items.AppendVarints(out.table_sizes);
        break;
      case f::kRateLimited:
        items.AppendVarints(out.rate_limited);
        break;
      case f::kTrajectories:
        trajectory_parts.push_back(items.bytes());
        break;
      default:
        break;  // unknown fields are skipped, as protobuf does
    }
  }
  out.trajectories = wire::ReadTrajectories(
      ProtoReader(Single(trajectory_parts, "SampleResponse.items.trajectories"), "SampleResponse.items.trajectories"));
  const size_t count = out.trajectories.size();
  CheckCount("keys", out.keys.size(), count);
  CheckCount("priorities", out.priorities.size(), count);
  CheckCount("times_sampled", out.times_sampled.size(), count);
  CheckCount("probabilities", out.probabilities.size(), count);
  CheckCount("table_sizes", out.table_sizes.size(), count);
  CheckCount("rate_limited", out.rate_limited.size(), count);

  // The chunks are held only once every trajectory is known to use chunks
  // that were sent, so that a bad response leaves `holder` as it was.
  const wire::ChunkBatchMessage batch =
      wire::ReadChunkBatch(ProtoReader(Single(chunk_parts, "SampleResponse.chunks"), "SampleResponse.chunks"));
  std::vector<std::shared_ptr<const Chunk>> received;
  try {
    received = wire::MakeChunks(batch, std::as_bytes(payloads), store);
  } catch (const InvalidArgumentError& error) {
    throw InvalidArgumentError(std::string("SampleResponse.chunks: ") + error.what());
  }
  std::unordered_set<uint64_t> sent;
  for (const auto& chunk : received) sent.insert(chunk->key());
  for (const uint64_t key : out.trajectories.chunk_keys()) {
    if (!sent.count(key) && !holder.Holds(key)) {
      throw InvalidArgumentError("SampleResponse: a trajectory uses chunk " + std::to_string(key) +
                                 ", which was not sent with it");
    }
  }
  for (auto& chunk : received) holder.Hold(std::move(chunk));
  return out;
}

}  // namespace resound

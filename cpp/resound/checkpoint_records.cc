#include "resound/checkpoint_records.h"

#include <cmath>
#include <string>
#include <utility>

namespace resound {
namespace {

void PutSelector(CheckpointRecordEncoder& out, const SelectorOptions& options) {
  out.Put<uint8_t>(static_cast<uint8_t>(options.kind)).Put<double>(options.priority_exponent);
  out.Put<uint8_t>(options.seed.has_value()).Put<uint64_t>(options.seed.value_or(0));
}

SelectorOptions GetSelector(CheckpointRecordDecoder& in) {
  SelectorOptions options;
  const auto kind = in.Get<uint8_t>("selector kind");
  if (kind > static_cast<uint8_t>(SelectorKind::kMaxHeap)) in.Fail("unknown selector kind " + std::to_string(kind));
  options.kind = static_cast<SelectorKind>(kind);
  options.priority_exponent = in.Get<double>("priority exponent");
  const bool seeded = in.Get<uint8_t>("selector seed flag") != 0;
  const auto seed = in.Get<uint64_t>("selector seed");
  if (seeded) options.seed = seed;
  return options;
}

}  // namespace

void CheckpointRecords::PutTable(CheckpointRecordEncoder& out, const TableConfig& config, const TableState& state) {
  out.PutString(config.name);
  PutSelector(out, config.sampler);
  PutSelector(out, config.remover);
  out.Put<int64_t>(config.max_size).Put<int32_t>(config.max_times_sampled);
  const RateLimiterConfig& limiter = config.rate_limiter;
  out.Put<double>(limiter.samples_per_insert).Put<int64_t>(limiter.min_size_to_sample);
  out.Put<double>(limiter.min_diff).Put<double>(limiter.max_diff);
  out.PutString(config.signature);
  out.Put<int64_t>(state.counters.inserts).Put<int64_t>(state.counters.samples).Put<int64_t>(state.counters.deletes);
  out.Put<int64_t>(state.num_deleted_episodes).Put<int64_t>(state.num_unique_samples);
  out.Put<int64_t>(static_cast<int64_t>(state.entries.size()));
}

CheckpointSummary::TableSummary CheckpointRecords::GetTable(CheckpointRecordDecoder& in) {
  CheckpointSummary::TableSummary table;
  TableConfig& config = table.config;
  config.name = in.GetString("table name");
  config.sampler = GetSelector(in);
  config.remover = GetSelector(in);
  config.max_size = in.Get<int64_t>("max_size");
  config.max_times_sampled = in.Get<int32_t>("max_times_sampled");
  config.rate_limiter.samples_per_insert = in.Get<double>("samples_per_insert");
  config.rate_limiter.min_size_to_sample = in.Get<int64_t>("min_size_to_sample");
  config.rate_limiter.min_diff = in.Get<double>("min_diff");
  config.rate_limiter.max_diff = in.Get<double>("max_diff");
  config.signature = in.GetString("signature");
  table.counters.inserts = in.Get<int64_t>("insert count");
  table.counters.samples = in.Get<int64_t>("sample count");
  table.counters.deletes = in.Get<int64_t>("delete count");
  table.num_deleted_episodes = in.Get<int64_t>("num_deleted_episodes");
  table.num_unique_samples = in.Get<int64_t>("num_unique_samples");
  table.num_items = in.Get<int64_t>("number of items");
  in.Finish();
  try {
    config.Validate();
  } catch (const InvalidArgumentError& error) {
    in.Fail(std::string("invalid table configuration: ") + error.what());
  }
  if (table.num_items < 0) in.Fail("negative number of items");
  // The limiter counts the table's size as inserts - deletes: counters that
  // disagree with the items would leave a restored table that cannot sample.
  const auto& counters = table.counters;
  if (counters.inserts < 0 || counters.samples < 0 || counters.deletes < 0 ||
      table.num_deleted_episodes < 0 || table.num_unique_samples < 0) {
    in.Fail("negative counter");
  }
  if (counters.deletes > counters.inserts || counters.inserts - counters.deletes != table.num_items) {
    in.Fail("insert count " + std::to_string(counters.inserts) + " - delete count " +
            std::to_string(counters.deletes) + " != number of items " + std::to_string(table.num_items));
  }
  return table;
}

void CheckpointRecords::PutChunkHead(CheckpointRecordEncoder& out, const Chunk& chunk) {
  out.Put<uint64_t>(chunk.key()).PutString(chunk.dtype().str());
  out.Put<uint32_t>(static_cast<uint32_t>(chunk.step_shape().size()));
  for (const int64_t extent : chunk.step_shape()) out.Put<int64_t>(extent);
  out.Put<int64_t>(chunk.num_steps()).Put<uint8_t>(static_cast<uint8_t>(chunk.compression()));
  out.Put<uint8_t>(chunk.delta_encoded()).Put<uint64_t>(chunk.episode_id());
  out.Put<int64_t>(chunk.start_step()).Put<int64_t>(chunk.end_step()).Put<int64_t>(chunk.uncompressed_size());
}

// The chunk's metadata, and its payload (the rest of the record), validated.
std::pair<ChunkMetadata, std::span<const std::byte>> CheckpointRecords::GetChunk(CheckpointRecordDecoder& in) {
  ChunkMetadata metadata;
  metadata.key = in.Get<uint64_t>("chunk key");
  const std::string dtype = in.GetString("chunk dtype");
  const auto rank = in.Get<uint32_t>("chunk rank");
  if (rank > 64) in.Fail("chunk rank " + std::to_string(rank) + " is above 64");
  for (uint32_t i = 0; i < rank; ++i) metadata.step_shape.push_back(in.Get<int64_t>("chunk shape"));
  metadata.num_steps = in.Get<int64_t>("chunk num_steps");
  const auto compression = in.Get<uint8_t>("chunk compression");
  metadata.delta_encoded = in.Get<uint8_t>("chunk delta flag") != 0;
  metadata.episode_id = in.Get<uint64_t>("chunk episode");
  metadata.start_step = in.Get<int64_t>("chunk start_step");
  metadata.end_step = in.Get<int64_t>("chunk end_step");
  metadata.uncompressed_size = in.Get<int64_t>("chunk uncompressed_size");
  const auto payload = in.Rest();
  try {
    // Without the size rule: chunks stored before it still load (see dtype.h).
    metadata.dtype = DType::ParseStored(dtype);
    if (compression > static_cast<uint8_t>(Compression::kLz4)) {
      throw InvalidArgumentError("unknown compression " + std::to_string(compression));
    }
    metadata.compression = static_cast<Compression>(compression);
    Chunk::Validate(metadata, payload.size());
  } catch (const InvalidArgumentError& error) {
    in.Fail(std::string("invalid chunk: ") + error.what());
  }
  return {std::move(metadata), payload};
}

void CheckpointRecords::PutItem(CheckpointRecordEncoder& out, uint32_t table, const TableState::Entry& entry) {
  out.Put<uint32_t>(table).Put<uint64_t>(entry.item->key()).Put<double>(entry.priority);
  out.Put<int32_t>(entry.times_sampled).Put<int64_t>(entry.inserted_at_ns);
  out.Put<uint64_t>(entry.sampler_tie_order).Put<uint64_t>(entry.remover_tie_order);
  const auto trajectory = entry.item->trajectory();
  out.Put<uint32_t>(static_cast<uint32_t>(trajectory.size()));
  for (size_t c = 0; c < trajectory.size(); ++c) {
    const auto column = trajectory[c];
    out.Put<uint8_t>(column.squeeze).Put<uint32_t>(static_cast<uint32_t>(column.slices.size()));
    for (const ChunkSlice& slice : column.slices) {
      out.Put<uint64_t>(slice.chunk_key).Put<int64_t>(slice.offset).Put<int64_t>(slice.length);
    }
  }
}


CheckpointRecords::Item CheckpointRecords::GetItem(CheckpointRecordDecoder& in, size_t record_bytes) {
  Item record;
  record.table = in.Get<uint32_t>("item table");
  record.key = in.Get<uint64_t>("item key");
  record.entry.priority = in.Get<double>("item priority");
  record.entry.times_sampled = in.Get<int32_t>("item times_sampled");
  record.entry.inserted_at_ns = in.Get<int64_t>("item inserted_at");
  record.entry.sampler_tie_order = in.Get<uint64_t>("item sampler order");
  record.entry.remover_tie_order = in.Get<uint64_t>("item remover order");
  const auto columns = in.Get<uint32_t>("item columns");
  // Every column and slice takes bytes of the record: a count beyond them is
  // damage, found before anything is allocated for it.
  if (columns > record_bytes) in.Fail("item claims " + std::to_string(columns) + " columns");
  record.trajectory.resize(columns);
  for (auto& column : record.trajectory) {
    column.squeeze = in.Get<uint8_t>("item squeeze flag") != 0;
    const auto slices = in.Get<uint32_t>("item slices");
    if (slices > record_bytes) in.Fail("item claims " + std::to_string(slices) + " slices");
    column.slices.resize(slices);
    for (auto& slice : column.slices) {
      slice.chunk_key = in.Get<uint64_t>("slice chunk key");
      slice.offset = in.Get<int64_t>("slice offset");
      slice.length = in.Get<int64_t>("slice length");
    }
  }
  in.Finish();
  if (record.entry.times_sampled < 0) in.Fail("negative times_sampled");
  if (std::isnan(record.entry.priority)) in.Fail("priority is NaN");
  return record;
}

}  // namespace resound

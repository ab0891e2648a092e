#include "resound/checkpoint.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <span>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "resound/checkpoint_file_reader.h"
#include "resound/checkpoint_file_writer.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/item.h"

namespace resound {
namespace {

enum RecordType : uint32_t { kTableRecord = 1, kChunkRecord = 2, kItemRecord = 3 };

static_assert(std::endian::native == std::endian::little, "checkpoint records assume a little-endian host");

// Appends fixed-width little-endian fields and length-prefixed strings.
class RecordEncoder {
 public:
  template <typename T>
  RecordEncoder& Put(T value) {
    static_assert(std::is_arithmetic_v<T>);
    const auto* bytes = reinterpret_cast<const char*>(&value);
    out_.append(bytes, sizeof value);
    return *this;
  }
  RecordEncoder& PutString(std::string_view text) {
    Put<uint64_t>(text.size());
    out_.append(text);
    return *this;
  }
  std::span<const std::byte> bytes() const noexcept {
    return {reinterpret_cast<const std::byte*>(out_.data()), out_.size()};
  }

 private:
  std::string out_;
};

// Reads what RecordEncoder wrote; anything out of bounds or left over is a
// DataLossError naming the file and the record.
class RecordDecoder {
 public:
  RecordDecoder(std::span<const std::byte> data, const std::string& path, uint64_t record)
      : data_(data), path_(path), record_(record) {}

  template <typename T>
  T Get(const char* field) {
    static_assert(std::is_arithmetic_v<T>);
    Need(sizeof(T), field);
    T value;
    std::memcpy(&value, data_.data() + position_, sizeof value);
    position_ += sizeof value;
    return value;
  }
  std::string GetString(const char* field) {
    const auto size = Get<uint64_t>(field);
    Need(size, field);
    std::string text(reinterpret_cast<const char*>(data_.data() + position_), size);
    position_ += size;
    return text;
  }
  std::span<const std::byte> Rest() noexcept {
    auto rest = data_.subspan(position_);
    position_ = data_.size();
    return rest;
  }
  void Finish() const {
    if (position_ != data_.size()) Fail(std::to_string(data_.size() - position_) + " unexpected bytes at its end");
  }
  [[noreturn]] void Fail(const std::string& what) const {
    throw DataLossError("checkpoint " + path_ + " cannot be loaded: record " + std::to_string(record_) + ": " + what);
  }

 private:
  void Need(uint64_t size, const char* field) const {
    if (size > data_.size() - position_) Fail(std::string("it ends inside ") + field);
  }

  std::span<const std::byte> data_;
  const std::string& path_;
  const uint64_t record_;
  size_t position_ = 0;
};

void PutSelector(RecordEncoder& out, const SelectorOptions& options) {
  out.Put<uint8_t>(static_cast<uint8_t>(options.kind)).Put<double>(options.priority_exponent);
  out.Put<uint8_t>(options.seed.has_value()).Put<uint64_t>(options.seed.value_or(0));
}

SelectorOptions GetSelector(RecordDecoder& in) {
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

void PutTable(RecordEncoder& out, const TableConfig& config, const TableState& state) {
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

CheckpointSummary::TableSummary GetTable(RecordDecoder& in) {
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

void PutChunkHead(RecordEncoder& out, const Chunk& chunk) {
  out.Put<uint64_t>(chunk.key()).PutString(chunk.dtype().str());
  out.Put<uint32_t>(static_cast<uint32_t>(chunk.step_shape().size()));
  for (const int64_t extent : chunk.step_shape()) out.Put<int64_t>(extent);
  out.Put<int64_t>(chunk.num_steps()).Put<uint8_t>(static_cast<uint8_t>(chunk.compression()));
  out.Put<uint8_t>(chunk.delta_encoded()).Put<uint64_t>(chunk.episode_id());
  out.Put<int64_t>(chunk.start_step()).Put<int64_t>(chunk.end_step()).Put<int64_t>(chunk.uncompressed_size());
}

// The chunk's metadata, and its payload (the rest of the record), validated.
std::pair<ChunkMetadata, std::span<const std::byte>> GetChunk(RecordDecoder& in) {
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

void PutItem(RecordEncoder& out, uint32_t table, const TableState::Entry& entry) {
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

struct ItemRecord {
  uint32_t table = 0;
  uint64_t key = 0;
  TableState::Entry entry;  // without the item
  Trajectory trajectory;
};

ItemRecord GetItem(RecordDecoder& in, size_t record_bytes) {
  ItemRecord record;
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

// Reads a whole checkpoint. With `stores` empty it only checks (Inspect);
// otherwise chunks go into every store given and items are built against
// store_of_table[table] into states[table].
struct Loaded {
  CheckpointSummary summary;
  std::vector<TableState> states;
};

Loaded Read(const std::string& path, const std::vector<std::shared_ptr<ChunkStore>>& store_of_table,
            bool build) {
  CheckpointFileReader reader(path);
  Loaded loaded;
  std::unordered_map<uint64_t, std::vector<std::shared_ptr<const Chunk>>> chunks;  // held until the end
  std::unordered_set<uint64_t> chunk_keys;
  std::vector<std::unordered_set<uint64_t>> item_keys;
  std::vector<std::shared_ptr<ChunkStore>> distinct_stores;
  uint32_t type = 0;
  std::vector<std::byte> payload;
  bool tables_done = false;
  while (reader.Next(type, payload)) {
    const uint64_t index = reader.num_records() - 1;
    RecordDecoder in(payload, path, index);
    switch (type) {
      case kTableRecord: {
        if (tables_done) in.Fail("a table record after chunks or items");
        loaded.summary.tables.push_back(GetTable(in));
        loaded.states.emplace_back();
        item_keys.emplace_back();
        break;
      }
      case kChunkRecord: {
        if (!tables_done) {
          tables_done = true;
          if (build && store_of_table.size() != loaded.summary.tables.size()) {
            in.Fail("internal: stores do not match tables");
          }
          for (const auto& store : store_of_table) {
            bool seen = false;
            for (const auto& other : distinct_stores) seen = seen || other == store;
            if (!seen) distinct_stores.push_back(store);
          }
        }
        auto [metadata, data] = GetChunk(in);
        if (!chunk_keys.insert(metadata.key).second) in.Fail("chunk " + std::to_string(metadata.key) + " appears twice");
        ++loaded.summary.num_chunks;
        loaded.summary.chunk_bytes += static_cast<int64_t>(data.size());
        if (build) {
          auto& held = chunks[metadata.key];
          for (const auto& store : distinct_stores) held.push_back(store->Insert(metadata, data));
        }
        break;
      }
      case kItemRecord: {
        tables_done = true;
        ItemRecord record = GetItem(in, payload.size());
        if (record.table >= loaded.summary.tables.size()) {
          in.Fail("item of table " + std::to_string(record.table) + " but the file has " +
                  std::to_string(loaded.summary.tables.size()) + " tables");
        }
        if (!item_keys[record.table].insert(record.key).second) {
          in.Fail("item " + std::to_string(record.key) + " appears twice in one table");
        }
        for (const auto& column : record.trajectory) {
          for (const auto& slice : column.slices) {
            if (chunk_keys.count(slice.chunk_key) == 0) {
              in.Fail("item " + std::to_string(record.key) + " uses chunk " + std::to_string(slice.chunk_key) +
                      ", which is not before it in the file");
            }
          }
        }
        auto& state = loaded.states[record.table];
        if (build) {
          try {
            record.entry.item = Item::Create(record.key, record.trajectory, *store_of_table[record.table]);
          } catch (const std::exception& error) {
            in.Fail(std::string("invalid item: ") + error.what());
          }
        }
        state.entries.push_back(std::move(record.entry));
        break;
      }
      default:
        in.Fail("unknown record type " + std::to_string(type));
    }
  }
  for (size_t t = 0; t < loaded.summary.tables.size(); ++t) {
    const auto& table = loaded.summary.tables[t];
    if (static_cast<int64_t>(loaded.states[t].entries.size()) != table.num_items) {
      throw DataLossError("checkpoint " + path + " cannot be loaded: table '" + table.config.name + "' should have " +
                          std::to_string(table.num_items) + " items but the file has " +
                          std::to_string(loaded.states[t].entries.size()));
    }
    loaded.states[t].counters = table.counters;
    loaded.states[t].num_deleted_episodes = table.num_deleted_episodes;
    loaded.states[t].num_unique_samples = table.num_unique_samples;
  }
  loaded.summary.file_bytes = reader.file_bytes();
  return loaded;
}

std::string Describe(const SelectorOptions& options) {
  std::string text = options.kind_name();
  if (options.kind == SelectorKind::kPrioritized) text += "(" + std::to_string(options.priority_exponent) + ")";
  return text;
}

// InvalidArgumentError naming the first setting of `saved` that `table`
// does not share.
void CheckCompatible(const TableConfig& saved, const Table& table, const std::string& path) {
  const TableConfig& current = table.config();
  const std::string where = "checkpoint " + path + ": table '" + saved.name + "' was saved with ";
  const auto same_selector = [](const SelectorOptions& a, const SelectorOptions& b) {
    return a.kind == b.kind && (a.kind != SelectorKind::kPrioritized || a.priority_exponent == b.priority_exponent);
  };
  if (!same_selector(saved.sampler, current.sampler)) {
    throw InvalidArgumentError(where + "sampler " + Describe(saved.sampler) + ", the server's has " +
                               Describe(current.sampler));
  }
  if (!same_selector(saved.remover, current.remover)) {
    throw InvalidArgumentError(where + "remover " + Describe(saved.remover) + ", the server's has " +
                               Describe(current.remover));
  }
  if (saved.max_times_sampled != current.max_times_sampled) {
    throw InvalidArgumentError(where + "max_times_sampled " + std::to_string(saved.max_times_sampled) +
                               ", the server's has " + std::to_string(current.max_times_sampled));
  }
  const RateLimiterConfig& a = saved.rate_limiter;
  const RateLimiterConfig& b = current.rate_limiter;
  if (a.samples_per_insert != b.samples_per_insert || a.min_size_to_sample != b.min_size_to_sample ||
      a.min_diff != b.min_diff || a.max_diff != b.max_diff) {
    throw InvalidArgumentError(where + "rate limiter " + a.ToString() + ", the server's has " + b.ToString());
  }
}

}  // namespace

CheckpointSummary Checkpoint::Save(const std::vector<Table*>& tables, const std::string& path) {
  std::set<std::string> names;
  for (const Table* table : tables) {
    if (!names.insert(table->name()).second) {
      throw InvalidArgumentError("tables: two tables are named '" + table->name() + "'");
    }
  }
  // References only, one table's lock at a time.
  std::vector<TableState> states;
  states.reserve(tables.size());
  for (const Table* table : tables) states.push_back(table->Checkpoint());

  CheckpointSummary summary;
  CheckpointFileWriter writer(path);
  for (size_t t = 0; t < tables.size(); ++t) {
    RecordEncoder record;
    PutTable(record, tables[t]->config(), states[t]);
    writer.Append(kTableRecord, {record.bytes()});
    summary.tables.push_back({tables[t]->config(), states[t].counters,
                              static_cast<int64_t>(states[t].entries.size()), states[t].num_deleted_episodes,
                              states[t].num_unique_samples});
    summary.tables.back().config.column_specs.clear();
  }
  std::unordered_set<uint64_t> written;
  for (size_t t = 0; t < tables.size(); ++t) {
    for (const auto& entry : states[t].entries) {
      for (const auto& chunk : entry.item->chunks()) {
        if (!written.insert(chunk->key()).second) continue;
        RecordEncoder head;
        PutChunkHead(head, *chunk);
        writer.Append(kChunkRecord, {head.bytes(), {chunk->data(), chunk->data_size()}});
        ++summary.num_chunks;
        summary.chunk_bytes += static_cast<int64_t>(chunk->data_size());
      }
      RecordEncoder item;
      PutItem(item, static_cast<uint32_t>(t), entry);
      writer.Append(kItemRecord, {item.bytes()});
    }
  }
  writer.Commit();
  summary.file_bytes = writer.bytes_written();
  return summary;
}

CheckpointSummary Checkpoint::Inspect(const std::string& path) { return Read(path, {}, false).summary; }

CheckpointSummary Checkpoint::ReadTables(const std::string& path) {
  CheckpointSummary head;
  CheckpointFileReader reader(path);
  uint32_t type = 0;
  std::vector<std::byte> payload;
  std::unordered_set<std::string> seen;
  while (reader.Next(type, payload) && type == kTableRecord) {
    RecordDecoder in(payload, path, reader.num_records() - 1);
    head.tables.push_back(GetTable(in));
    if (!seen.insert(head.tables.back().config.name).second) {
      throw DataLossError("checkpoint " + path + " cannot be loaded: it holds table '" +
                          head.tables.back().config.name + "' twice");
    }
  }
  return head;
}

CheckpointSummary Checkpoint::Load(const std::string& path, const std::vector<Table*>& tables) {
  // The table records come first in the file: match them to ours (and
  // learn which chunk stores to build against) before reading any chunk.
  std::unordered_map<std::string, Table*> by_name;
  for (Table* table : tables) by_name[table->name()] = table;
  std::vector<std::shared_ptr<ChunkStore>> stores;
  std::vector<Table*> targets;
  {
    const CheckpointSummary head = ReadTables(path);
    std::string available;
    for (Table* table : tables) available += (available.empty() ? "" : ", ") + table->name();
    for (const auto& saved : head.tables) {
      auto found = by_name.find(saved.config.name);
      if (found == by_name.end()) {
        throw InvalidArgumentError("checkpoint " + path + " has table '" + saved.config.name +
                                   "', which the server does not have (its tables: " + available + ")");
      }
      CheckCompatible(saved.config, *found->second, path);
      if (saved.num_items > found->second->config().max_size) {
        throw InvalidArgumentError("checkpoint " + path + ": table '" + saved.config.name + "' holds " +
                                   std::to_string(saved.num_items) + " items, above the server's max_size " +
                                   std::to_string(found->second->config().max_size));
      }
      if (found->second->size() != 0) {
        throw FailedPreconditionError("checkpoint " + path + ": table '" + saved.config.name +
                                      "' already holds items; restore into empty tables");
      }
      targets.push_back(found->second);
      stores.push_back(found->second->chunk_store());
    }
  }
  Loaded loaded = Read(path, stores, true);
  if (loaded.states.size() != targets.size()) {
    throw DataLossError("checkpoint " + path + " cannot be loaded: it changed while being read");
  }
  size_t restored = 0;
  try {
    for (; restored < targets.size(); ++restored) targets[restored]->Restore(std::move(loaded.states[restored]));
  } catch (...) {
    for (size_t t = 0; t < restored; ++t) targets[t]->Reset();
    throw;
  }
  return loaded.summary;
}

}  // namespace resound

#include "resound/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "resound/checkpoint_file_reader.h"
#include "resound/checkpoint_file_writer.h"
#include "resound/checkpoint_manifest.h"
#include "resound/checkpoint_record_decoder.h"
#include "resound/checkpoint_record_encoder.h"
#include "resound/checkpoint_records.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/item.h"

namespace resound {
namespace {

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
    CheckpointRecordDecoder in(payload, path, index);
    switch (type) {
      case CheckpointRecords::kTable: {
        if (tables_done) in.Fail("a table record after chunks or items");
        loaded.summary.tables.push_back(CheckpointRecords::GetTable(in));
        loaded.states.emplace_back();
        item_keys.emplace_back();
        break;
      }
      case CheckpointRecords::kChunk: {
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
        auto [metadata, data] = CheckpointRecords::GetChunk(in);
        if (!chunk_keys.insert(metadata.key).second) in.Fail("chunk " + std::to_string(metadata.key) + " appears twice");
        ++loaded.summary.num_chunks;
        loaded.summary.chunk_bytes += static_cast<int64_t>(data.size());
        if (build) {
          auto& held = chunks[metadata.key];
          for (const auto& store : distinct_stores) held.push_back(store->Insert(metadata, data));
        }
        break;
      }
      case CheckpointRecords::kItem: {
        tables_done = true;
        CheckpointRecords::Item record = CheckpointRecords::GetItem(in, payload.size());
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

void CheckUniqueNames(const std::vector<Table*>& tables) {
  std::set<std::string> names;
  for (const Table* table : tables) {
    if (!names.insert(table->name()).second) {
      throw InvalidArgumentError("tables: two tables are named '" + table->name() + "'");
    }
  }
}

// References only, one table's lock at a time.
std::vector<TableState> Snapshot(const std::vector<Table*>& tables) {
  std::vector<TableState> states;
  states.reserve(tables.size());
  for (const Table* table : tables) states.push_back(table->Checkpoint());
  return states;
}

CheckpointSummary::TableSummary SummaryOf(const Table& table, const TableState& state) {
  CheckpointSummary::TableSummary summary{table.config(), state.counters, static_cast<int64_t>(state.entries.size()),
                                          state.num_deleted_episodes, state.num_unique_samples};
  summary.config.column_specs.clear();
  return summary;
}

// Writes tables[group[i]] (with states[group[i]]) into one new file `path`:
// their TABLE records, then each chunk once before the first item that
// needs it, then the items, tables in group order.
CheckpointSummary WriteTableFile(const std::vector<Table*>& tables, const std::vector<TableState>& states,
                                 const std::vector<size_t>& group, const std::string& path) {
  CheckpointSummary summary;
  CheckpointFileWriter writer(path);
  for (const size_t t : group) {
    CheckpointRecordEncoder record;
    CheckpointRecords::PutTable(record, tables[t]->config(), states[t]);
    writer.Append(CheckpointRecords::kTable, {record.bytes()});
    summary.tables.push_back(SummaryOf(*tables[t], states[t]));
  }
  std::unordered_set<uint64_t> written;
  for (size_t index = 0; index < group.size(); ++index) {
    for (const auto& entry : states[group[index]].entries) {
      for (const auto& chunk : entry.item->chunks()) {
        if (!written.insert(chunk->key()).second) continue;
        CheckpointRecordEncoder head;
        CheckpointRecords::PutChunkHead(head, *chunk);
        writer.Append(CheckpointRecords::kChunk, {head.bytes(), {chunk->data(), chunk->data_size()}});
        ++summary.num_chunks;
        summary.chunk_bytes += static_cast<int64_t>(chunk->data_size());
      }
      CheckpointRecordEncoder item;
      CheckpointRecords::PutItem(item, static_cast<uint32_t>(index), entry);
      writer.Append(CheckpointRecords::kItem, {item.bytes()});
    }
  }
  writer.Commit();
  summary.file_bytes = writer.bytes_written();
  return summary;
}

// The tables (as indices) in groups that share no chunk with one another,
// each in table order, the groups in the order of their first tables.
std::vector<std::vector<size_t>> GroupsSharingNoChunk(const std::vector<TableState>& states) {
  std::vector<size_t> parent(states.size());
  for (size_t t = 0; t < parent.size(); ++t) parent[t] = t;
  const auto root = [&parent](size_t t) {
    while (parent[t] != t) t = parent[t] = parent[parent[t]];
    return t;
  };
  std::unordered_map<uint64_t, size_t> first_user;  // chunk key -> a table that uses it
  for (size_t t = 0; t < states.size(); ++t) {
    for (const auto& entry : states[t].entries) {
      for (const auto& chunk : entry.item->chunks()) {
        const auto [found, inserted] = first_user.emplace(chunk->key(), t);
        if (inserted || found->second == t) continue;
        const size_t a = root(found->second);
        const size_t b = root(t);
        if (a != b) parent[std::max(a, b)] = std::min(a, b);
      }
    }
  }
  std::vector<std::vector<size_t>> groups;
  std::vector<size_t> group_of_root(states.size(), states.size());
  for (size_t t = 0; t < states.size(); ++t) {
    const size_t r = root(t);
    if (group_of_root[r] == states.size()) {
      group_of_root[r] = groups.size();
      groups.emplace_back();
    }
    groups[group_of_root[r]].push_back(t);
  }
  return groups;
}

// The number and bytes of the distinct chunks of tables[group] (what their
// file holds, for the summary of a file linked rather than written).
std::pair<int64_t, int64_t> ChunksOf(const std::vector<TableState>& states, const std::vector<size_t>& group) {
  std::unordered_set<uint64_t> seen;
  int64_t bytes = 0;
  for (const size_t t : group) {
    for (const auto& entry : states[t].entries) {
      for (const auto& chunk : entry.item->chunks()) {
        if (seen.insert(chunk->key()).second) bytes += static_cast<int64_t>(chunk->data_size());
      }
    }
  }
  return {static_cast<int64_t>(seen.size()), bytes};
}

// The files a checkpoint at `path` consists of: the table files of a
// manifest (each with the tables the manifest says it holds), or `path`.
struct CheckpointFiles {
  std::vector<std::string> paths;
  uint64_t manifest_bytes = 0;
  std::vector<CheckpointManifest::Entry> entries;  // per path; none for a single file

  // The tables file f must hold (what the manifest says; empty: anything).
  const std::vector<std::string>& tables(size_t f) const {
    static const std::vector<std::string> kAny;
    return entries.empty() ? kAny : entries[f].tables;
  }
};

CheckpointFiles FilesOf(const std::string& path) {
  CheckpointFiles files;
  std::optional<CheckpointManifest> manifest = CheckpointManifest::Read(path);
  if (!manifest) {
    files.paths.push_back(path);
    return files;
  }
  for (const auto& entry : manifest->entries) {
    files.paths.push_back(CheckpointManifest::Beside(path, entry.file));
  }
  files.manifest_bytes = manifest->file_bytes;
  files.entries = std::move(manifest->entries);
  return files;
}

// DataLossError unless the table file `path` holds the tables `expected`
// (what its manifest says; empty: anything).
void CheckFileTables(const CheckpointSummary& file, const std::vector<std::string>& expected, const std::string& path) {
  if (expected.empty()) return;
  std::vector<std::string> names;
  for (const auto& table : file.tables) names.push_back(table.config.name);
  if (names != expected) {
    const auto join = [](const std::vector<std::string>& list) {
      std::string text;
      for (const auto& name : list) text += (text.empty() ? "'" : ", '") + name + "'";
      return text.empty() ? std::string("none") : text;
    };
    throw DataLossError("checkpoint " + path + " cannot be loaded: it holds tables " + join(names) +
                        " but its manifest says " + join(expected));
  }
}

// Adds a table file's counts to the summary of a whole checkpoint.
void Accumulate(CheckpointSummary& total, CheckpointSummary&& file) {
  for (auto& table : file.tables) total.tables.push_back(std::move(table));
  total.num_chunks += file.num_chunks;
  total.chunk_bytes += file.chunk_bytes;
  total.file_bytes += file.file_bytes;
}

CheckpointSummary::FileSummary FileSummaryOf(const CheckpointManifest::Entry& entry, uint64_t bytes, bool reused) {
  return {entry.file, entry.tables, reused, bytes};
}

// Removes the files of a directory save that failed part-way.
class RemoveUnlessKept {
 public:
  RemoveUnlessKept() = default;
  RemoveUnlessKept(const RemoveUnlessKept&) = delete;
  RemoveUnlessKept& operator=(const RemoveUnlessKept&) = delete;
  ~RemoveUnlessKept() {
    if (kept_) return;
    for (const auto& path : paths_) ::unlink(path.c_str());
  }
  void Add(std::string path) { paths_.push_back(std::move(path)); }
  void Keep() noexcept { kept_ = true; }

 private:
  std::vector<std::string> paths_;
  bool kept_ = false;
};

}  // namespace

CheckpointSummary Checkpoint::Save(const std::vector<Table*>& tables, const std::string& path) {
  CheckUniqueNames(tables);
  const std::vector<TableState> states = Snapshot(tables);
  std::vector<size_t> all(tables.size());
  for (size_t t = 0; t < all.size(); ++t) all[t] = t;
  return WriteTableFile(tables, states, all, path);
}

CheckpointSummary Checkpoint::SaveDirectory(const std::vector<Table*>& tables, const std::string& directory,
                                            const std::string& previous, const std::vector<std::string>& unchanged) {
  CheckUniqueNames(tables);
  const std::vector<TableState> states = Snapshot(tables);
  // Opened first: its temporary (holding this process's pid) marks the
  // directory as being saved until the manifest is complete, so that a save
  // killed part-way is recognised and its table files removed
  // (resound.checkpointers).
  CheckpointFileWriter manifest(directory + "/" + kManifestName);
  std::vector<CheckpointManifest::Entry> earlier;
  if (!previous.empty() && !unchanged.empty()) {
    try {
      if (auto last = CheckpointManifest::Read(previous + "/" + kManifestName)) earlier = std::move(last->entries);
    } catch (const std::exception&) {
      // Gone, damaged or of the one-file layout: nothing is linked from it.
    }
  }
  const std::set<std::string> same(unchanged.begin(), unchanged.end());

  CheckpointSummary summary;
  std::vector<CheckpointSummary::TableSummary> by_table(tables.size());
  std::vector<CheckpointManifest::Entry> entries;
  RemoveUnlessKept cleanup;
  const std::vector<std::vector<size_t>> groups = GroupsSharingNoChunk(states);
  for (size_t g = 0; g < groups.size(); ++g) {
    CheckpointManifest::Entry entry{CheckpointManifest::TableFileName(g), {}};
    bool all_unchanged = true;
    for (const size_t t : groups[g]) {
      entry.tables.push_back(tables[t]->name());
      all_unchanged = all_unchanged && same.count(tables[t]->name()) != 0;
      by_table[t] = SummaryOf(*tables[t], states[t]);
    }
    const std::string path = directory + "/" + entry.file;
    bool linked = false;
    if (all_unchanged) {
      for (const auto& old : earlier) {
        if (old.tables != entry.tables) continue;
        linked = ::link((previous + "/" + old.file).c_str(), path.c_str()) == 0;
        break;
      }
    }
    if (linked) {
      cleanup.Add(path);
      struct stat info {};
      const uint64_t bytes = ::stat(path.c_str(), &info) == 0 ? static_cast<uint64_t>(info.st_size) : 0;
      const auto [num_chunks, chunk_bytes] = ChunksOf(states, groups[g]);
      summary.num_chunks += num_chunks;
      summary.chunk_bytes += chunk_bytes;
      summary.file_bytes += bytes;
      summary.files.push_back(FileSummaryOf(entry, bytes, true));
    } else {
      CheckpointSummary file = WriteTableFile(tables, states, groups[g], path);
      cleanup.Add(path);
      summary.num_chunks += file.num_chunks;
      summary.chunk_bytes += file.chunk_bytes;
      summary.file_bytes += file.file_bytes;
      summary.files.push_back(FileSummaryOf(entry, file.file_bytes, false));
    }
    entries.push_back(std::move(entry));
  }
  summary.file_bytes += CheckpointManifest::Write(manifest, entries);
  cleanup.Keep();
  summary.tables = std::move(by_table);
  return summary;
}

CheckpointSummary Checkpoint::Inspect(const std::string& path) {
  const CheckpointFiles files = FilesOf(path);
  if (files.entries.empty()) return Read(path, {}, false).summary;
  CheckpointSummary total;
  total.file_bytes = files.manifest_bytes;
  for (size_t f = 0; f < files.paths.size(); ++f) {
    CheckpointSummary file = Read(files.paths[f], {}, false).summary;
    CheckFileTables(file, files.tables(f), files.paths[f]);
    total.files.push_back(FileSummaryOf(files.entries[f], file.file_bytes, false));
    Accumulate(total, std::move(file));
  }
  return total;
}

namespace {

CheckpointSummary ReadTableRecords(const std::string& path) {
  CheckpointSummary head;
  CheckpointFileReader reader(path);
  uint32_t type = 0;
  std::vector<std::byte> payload;
  std::unordered_set<std::string> seen;
  while (reader.Next(type, payload) && type == CheckpointRecords::kTable) {
    CheckpointRecordDecoder in(payload, path, reader.num_records() - 1);
    head.tables.push_back(CheckpointRecords::GetTable(in));
    if (!seen.insert(head.tables.back().config.name).second) {
      throw DataLossError("checkpoint " + path + " cannot be loaded: it holds table '" +
                          head.tables.back().config.name + "' twice");
    }
  }
  return head;
}

}  // namespace

CheckpointSummary Checkpoint::ReadTables(const std::string& path) {
  const CheckpointFiles files = FilesOf(path);
  CheckpointSummary total;
  for (size_t f = 0; f < files.paths.size(); ++f) {
    CheckpointSummary file = ReadTableRecords(files.paths[f]);
    CheckFileTables(file, files.tables(f), files.paths[f]);
    Accumulate(total, std::move(file));
  }
  total.file_bytes = 0;
  return total;
}

CheckpointSummary Checkpoint::Load(const std::string& path, const std::vector<Table*>& tables) {
  const CheckpointFiles files = FilesOf(path);
  // The table records come first in each file: match them to ours (and
  // learn which chunk stores to build against) before reading any chunk.
  std::unordered_map<std::string, Table*> by_name;
  for (Table* table : tables) by_name[table->name()] = table;
  std::string available;
  for (Table* table : tables) available += (available.empty() ? "" : ", ") + table->name();
  std::vector<std::vector<Table*>> targets(files.paths.size());
  std::vector<std::vector<std::shared_ptr<ChunkStore>>> stores(files.paths.size());
  for (size_t f = 0; f < files.paths.size(); ++f) {
    const std::string& file = files.paths[f];
    const CheckpointSummary head = ReadTableRecords(file);
    CheckFileTables(head, files.tables(f), file);
    for (const auto& saved : head.tables) {
      auto found = by_name.find(saved.config.name);
      if (found == by_name.end()) {
        throw InvalidArgumentError("checkpoint " + file + " has table '" + saved.config.name +
                                   "', which the server does not have (its tables: " + available + ")");
      }
      CheckCompatible(saved.config, *found->second, file);
      if (saved.num_items > found->second->config().max_size) {
        throw InvalidArgumentError("checkpoint " + file + ": table '" + saved.config.name + "' holds " +
                                   std::to_string(saved.num_items) + " items, above the server's max_size " +
                                   std::to_string(found->second->config().max_size));
      }
      if (found->second->size() != 0) {
        throw FailedPreconditionError("checkpoint " + file + ": table '" + saved.config.name +
                                      "' already holds items; restore into empty tables");
      }
      targets[f].push_back(found->second);
      stores[f].push_back(found->second->chunk_store());
    }
  }
  // Every file is read (its items built) before any table changes.
  std::vector<Loaded> loaded;
  loaded.reserve(files.paths.size());
  for (size_t f = 0; f < files.paths.size(); ++f) {
    loaded.push_back(Read(files.paths[f], stores[f], true));
    if (loaded.back().states.size() != targets[f].size()) {
      throw DataLossError("checkpoint " + files.paths[f] + " cannot be loaded: it changed while being read");
    }
  }
  std::vector<Table*> restored;
  try {
    for (size_t f = 0; f < loaded.size(); ++f) {
      for (size_t t = 0; t < targets[f].size(); ++t) {
        targets[f][t]->Restore(std::move(loaded[f].states[t]));
        restored.push_back(targets[f][t]);
      }
    }
  } catch (...) {
    for (Table* table : restored) table->Reset();
    throw;
  }
  if (files.entries.empty()) return std::move(loaded.front().summary);
  CheckpointSummary total;
  total.file_bytes = files.manifest_bytes;
  for (size_t f = 0; f < loaded.size(); ++f) {
    total.files.push_back(FileSummaryOf(files.entries[f], loaded[f].summary.file_bytes, false));
    Accumulate(total, std::move(loaded[f].summary));
  }
  return total;
}

}  // namespace resound

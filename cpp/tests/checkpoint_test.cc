// Checkpoint::Save / Load / Inspect on real tables: a round trip restores
// every table (items, priorities, times sampled, counters, chunks shared
// between tables written once) and the restored tables go on exactly like
// the originals; damaged files, foreign tables and mismatched settings are
// refused with nothing changed; checkpoint directories group tables by the
// chunks they share and link unchanged groups' files.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "check.h"
#include "same_table_state.h"
#include "test_files.h"
#include "resound/checkpoint.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/table.h"

namespace resound {
namespace {

using test_files::Contents;
using test_files::Store;

std::shared_ptr<const Chunk> AddChunk(ChunkStore& store, uint64_t key) {
  ChunkMetadata metadata;
  metadata.key = key;
  metadata.dtype = DType::Parse("<i8");
  metadata.step_shape = {3};
  metadata.num_steps = 4;
  metadata.episode_id = key / 10;
  metadata.start_step = 0;
  metadata.end_step = 3;
  metadata.uncompressed_size = Chunk::RawSize(metadata);
  std::vector<std::byte> payload(static_cast<size_t>(metadata.uncompressed_size));
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = std::byte((key * 31 + i) & 0xff);
  return store.Insert(metadata, payload);
}

TableConfig Config(const std::string& name, SelectorKind sampler, SelectorKind remover) {
  TableConfig config;
  config.name = name;
  config.sampler = {sampler, 0.6, 1};
  config.remover = {remover, 0.6, 2};
  config.max_size = 50;
  config.max_times_sampled = 4;
  config.rate_limiter = RateLimiterConfig::MinSize(1);
  config.signature = "an opaque signature";
  return config;
}

struct Fixture {
  std::shared_ptr<ChunkStore> store = std::make_shared<ChunkStore>();
  std::vector<std::shared_ptr<const Chunk>> chunks;
  std::vector<std::unique_ptr<Table>> tables;

  Fixture() {
    tables.push_back(std::make_unique<Table>(Config("fifo", SelectorKind::kFifo, SelectorKind::kFifo), store));
    tables.push_back(std::make_unique<Table>(Config("heap", SelectorKind::kMaxHeap, SelectorKind::kMinHeap), store));
    tables.push_back(std::make_unique<Table>(Config("prio", SelectorKind::kPrioritized, SelectorKind::kFifo), store));
  }
  std::vector<Table*> raw() const {
    std::vector<Table*> out;
    for (const auto& table : tables) out.push_back(table.get());
    return out;
  }
};

// Items of two columns over shared chunks, written into every table (so
// tables share chunks too), with samples and priority updates in between.
std::vector<uint64_t> Drive(Fixture& f, uint64_t seed, int steps, uint64_t first_key) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> trace;
  for (int step = 0; step < steps; ++step) {
    const uint64_t key = first_key + static_cast<uint64_t>(step);
    f.chunks.push_back(AddChunk(*f.store, key));
    const uint64_t previous = step == 0 ? key : key - 1;
    for (auto& table : f.tables) {
      table->Insert({key, static_cast<double>(rng() % 3),
                     {{{{previous, 1, 3}, {key, 0, 2}}, false}, {{{key, 3, 1}}, true}}},
                    Deadline::AfterSeconds(5));
      if (rng() % 3 == 0) table->MutatePriorities({{key - rng() % 5, static_cast<double>(rng() % 3)}}, {});
      // Random selectors draw differently after a restore (their generators
      // start afresh); only deterministic tables must repeat themselves.
      const bool deterministic = table->config().sampler.is_deterministic();
      if (rng() % 2 == 0) {
        for (const auto& sample : table->Sample(2, Deadline::AfterSeconds(5))) {
          if (deterministic) trace.push_back(sample.item->key());
        }
      }
      if (deterministic) trace.push_back(static_cast<uint64_t>(table->size()));
    }
  }
  return trace;
}

void RoundTripIntoAnotherProcessLikeStore(const std::string& directory) {
  Fixture original;
  Drive(original, 1, 80, 1000);
  const std::string path = directory + "/round-trip.rsnd";
  const CheckpointSummary saved = Checkpoint::Save(original.raw(), path);
  RESOUND_CHECK(saved.tables.size() == 3);
  // Each chunk once, though three tables and overlapping items use it.
  std::set<uint64_t> used;
  for (const auto& table : original.tables) {
    for (const auto& item : table->Snapshot()) {
      for (const auto& chunk : item.item->chunks()) used.insert(chunk->key());
    }
  }
  RESOUND_CHECK(saved.num_chunks == static_cast<int64_t>(used.size()));

  const CheckpointSummary inspected = Checkpoint::Inspect(path);
  RESOUND_CHECK(inspected.num_chunks == saved.num_chunks && inspected.chunk_bytes == saved.chunk_bytes);
  RESOUND_CHECK(inspected.file_bytes == saved.file_bytes);
  for (size_t t = 0; t < 3; ++t) {
    RESOUND_CHECK(inspected.tables[t].config.name == original.tables[t]->name());
    RESOUND_CHECK(inspected.tables[t].config.signature == "an opaque signature");
    RESOUND_CHECK(inspected.tables[t].num_items == original.tables[t]->size());
  }

  // A fresh store, as in a new process: chunks come from the file.
  Fixture restored;
  const CheckpointSummary loaded = Checkpoint::Load(path, restored.raw());
  RESOUND_CHECK(loaded.num_chunks == saved.num_chunks);
  for (size_t t = 0; t < 3; ++t) test_tables::CheckSameState(*original.tables[t], *restored.tables[t], true);
  RESOUND_CHECK(restored.store->num_chunks() == used.size());
  // The same future: Fifo and heap tables sample the same keys.
  const auto a = Drive(original, 2, 60, 5000);
  const auto b = Drive(restored, 2, 60, 5000);
  RESOUND_CHECK(a == b);
  for (size_t t = 0; t < 2; ++t) test_tables::CheckSameState(*original.tables[t], *restored.tables[t], false);
  std::remove(path.c_str());
}

void RefusesMismatchesAndChangesNothing(const std::string& directory) {
  Fixture original;
  Drive(original, 3, 30, 1);
  const std::string path = directory + "/mismatch.rsnd";
  Checkpoint::Save(original.raw(), path);

  // A table the server lacks.
  Fixture missing;
  missing.tables.pop_back();
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { Checkpoint::Load(path, missing.raw()); }));
  for (const auto& table : missing.tables) RESOUND_CHECK(table->size() == 0);

  // Another sampler.
  Fixture other;
  other.tables[1] = std::make_unique<Table>(Config("heap", SelectorKind::kMinHeap, SelectorKind::kMinHeap), other.store);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { Checkpoint::Load(path, other.raw()); }));
  for (const auto& table : other.tables) RESOUND_CHECK(table->size() == 0);

  // A table that already holds items.
  Fixture busy;
  busy.chunks.push_back(AddChunk(*busy.store, 1));
  busy.tables[2]->Insert({1, 1.0, {{{{1, 0, 1}}, false}}}, Deadline::AfterSeconds(1));
  RESOUND_CHECK(Throws<FailedPreconditionError>([&] { Checkpoint::Load(path, busy.raw()); }));
  RESOUND_CHECK(busy.tables[0]->size() == 0 && busy.tables[1]->size() == 0 && busy.tables[2]->size() == 1);
  std::remove(path.c_str());
}

void DamageIsRefusedWithNothingChanged(const std::string& directory) {
  Fixture original;
  Drive(original, 4, 20, 1);
  const std::string path = directory + "/good.rsnd";
  Checkpoint::Save(original.raw(), path);
  const std::vector<char> good = Contents(path);
  const std::string damaged = directory + "/damaged.rsnd";
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<char> bytes = good;
    if (trial % 3 == 0) {
      bytes.resize(rng() % bytes.size());
    } else {
      const size_t flips = 1 + rng() % 4;
      for (size_t i = 0; i < flips; ++i) bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    }
    Store(damaged, bytes);
    Fixture target;
    RESOUND_CHECK(Throws<DataLossError>([&] { Checkpoint::Load(damaged, target.raw()); }));
    for (const auto& table : target.tables) RESOUND_CHECK(table->size() == 0);
    RESOUND_CHECK(Throws<DataLossError>([&] { Checkpoint::Inspect(damaged); }));
  }
  std::remove(damaged.c_str());
  std::remove(path.c_str());
}


// A checkpoint directory: tables sharing chunks in one file, others in
// their own; a second save links the file of unchanged tables; a load reads
// every file or changes nothing.
void DirectoriesGroupTablesAndLinkUnchangedFiles(const std::string& directory) {
  Fixture original;
  for (uint64_t key = 1; key <= 10; ++key) {
    // 'fifo' and 'heap' share each chunk; 'prio' has chunks of its own.
    original.chunks.push_back(AddChunk(*original.store, key));
    for (size_t t = 0; t < 2; ++t) {
      original.tables[t]->Insert({key, 1.0, {{{{key, 0, 4}}, false}}}, Deadline::AfterSeconds(5));
    }
    original.chunks.push_back(AddChunk(*original.store, 100 + key));
    original.tables[2]->Insert({100 + key, 1.0, {{{{100 + key, 0, 4}}, false}}}, Deadline::AfterSeconds(5));
  }
  const std::string first = directory + "/first";
  const std::string second = directory + "/second";
  RESOUND_CHECK(::mkdir(first.c_str(), 0755) == 0 && ::mkdir(second.c_str(), 0755) == 0);
  const CheckpointSummary one = Checkpoint::SaveDirectory(original.raw(), first, "", {});
  RESOUND_CHECK(one.files.size() == 2);
  RESOUND_CHECK((one.files[0].tables == std::vector<std::string>{"fifo", "heap"}));
  RESOUND_CHECK((one.files[1].tables == std::vector<std::string>{"prio"}));
  RESOUND_CHECK(!one.files[0].reused && !one.files[1].reused);
  RESOUND_CHECK(one.num_chunks == 20 && Checkpoint::Inspect(first + "/checkpoint.rsnd").num_chunks == 20);

  original.tables[0]->Sample(1, Deadline::AfterSeconds(5));  // 'fifo' changes
  const CheckpointSummary two = Checkpoint::SaveDirectory(original.raw(), second, first, {"heap", "prio"});
  RESOUND_CHECK(!two.files[0].reused && two.files[1].reused);
  struct stat a {};
  struct stat b {};
  RESOUND_CHECK(::stat((first + "/tables-1.rsnd").c_str(), &a) == 0);
  RESOUND_CHECK(::stat((second + "/tables-1.rsnd").c_str(), &b) == 0 && a.st_ino == b.st_ino);
  RESOUND_CHECK(two.num_chunks == 20 && two.chunk_bytes == one.chunk_bytes);

  Fixture restored;
  Checkpoint::Load(second + "/checkpoint.rsnd", restored.raw());
  for (size_t t = 0; t < 3; ++t) test_tables::CheckSameState(*original.tables[t], *restored.tables[t], true);
  RESOUND_CHECK(restored.store->num_chunks() == 20);

  // The second file damaged (a copy: the first directory links it): no table
  // is restored, though the first file reads fine.
  const std::string linked = second + "/tables-1.rsnd";
  std::vector<char> bytes = Contents(linked);
  bytes[bytes.size() / 2] ^= 0x5a;
  std::remove(linked.c_str());
  Store(linked, bytes);
  Fixture target;
  RESOUND_CHECK(Throws<DataLossError>([&] { Checkpoint::Load(second + "/checkpoint.rsnd", target.raw()); }));
  for (const auto& table : target.tables) RESOUND_CHECK(table->size() == 0);

  for (const std::string& path : {first, second}) {
    for (const char* name : {"/checkpoint.rsnd", "/tables-0.rsnd", "/tables-1.rsnd"}) {
      std::remove((path + name).c_str());
    }
    ::rmdir(path.c_str());
  }
}

}  // namespace
}  // namespace resound

int main() {
  const resound::test_files::TempDirectory temporary;
  const std::string& directory = temporary.path();
  resound::RoundTripIntoAnotherProcessLikeStore(directory);
  resound::RefusesMismatchesAndChangesNothing(directory);
  resound::DamageIsRefusedWithNothingChanged(directory);
  resound::DirectoriesGroupTablesAndLinkUnchangedFiles(directory);
  return 0;
}

// Table::Checkpoint and Table::Restore: a table rebuilt from a checkpoint of
// another holds the same items, priorities, times sampled, insertion times
// and counters, and then behaves exactly like the original: for every
// deterministic selector (Fifo, Lifo, MinHeap, MaxHeap, as sampler or
// remover), the same interleaving of inserts, priority updates and samples
// gives the same samples and evictions in both. Ties of equal priorities,
// including ones reordered by updates, are the hard case for heaps.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "same_table_state.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/table.h"

namespace resound {
namespace {

std::shared_ptr<const Chunk> AddChunk(ChunkStore& store, uint64_t key) {
  ChunkMetadata metadata;
  metadata.key = key;
  metadata.dtype = DType::Parse("<f4");
  metadata.step_shape = {2};
  metadata.num_steps = 1;
  metadata.uncompressed_size = Chunk::RawSize(metadata);
  std::vector<std::byte> payload(static_cast<size_t>(metadata.uncompressed_size), std::byte{1});
  return store.Insert(metadata, payload);
}

TableConfig Config(SelectorKind sampler, SelectorKind remover) {
  TableConfig config;
  config.name = "restored";
  config.sampler = {sampler, 0.8, 1};
  config.remover = {remover, 0.8, 2};
  config.max_size = 40;
  config.max_times_sampled = 3;
  config.rate_limiter = RateLimiterConfig::MinSize(1);
  return config;
}

// Random operations; priorities come from a few values so that ties abound.
// Returns a trace of what the table did (sampled keys, sizes).
std::vector<uint64_t> Drive(Table& table, ChunkStore& store, std::vector<std::shared_ptr<const Chunk>>& chunks,
                            uint64_t seed, int steps, uint64_t first_key) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> trace;
  uint64_t next_key = first_key;
  for (int step = 0; step < steps; ++step) {
    const auto op = rng() % 10;
    if (op < 5) {
      chunks.push_back(AddChunk(store, next_key));
      table.Insert({next_key, static_cast<double>(rng() % 3), {{{{next_key, 0, 1}}, true}}}, Deadline::AfterSeconds(5));
      ++next_key;
    } else if (op < 7 && next_key > first_key) {
      const uint64_t key = first_key + rng() % (next_key - first_key);  // may be gone: ignored
      table.MutatePriorities({{key, static_cast<double>(rng() % 3)}}, {});
    } else if (table.size() > 0) {
      for (const auto& sample : table.Sample(1 + static_cast<int64_t>(rng() % 3), Deadline::AfterSeconds(5))) {
        trace.push_back(sample.item->key());
        trace.push_back(static_cast<uint64_t>(sample.times_sampled));
      }
    }
    trace.push_back(static_cast<uint64_t>(table.size()));
  }
  return trace;
}

void CheckSameState(const Table& a, const Table& b, bool same_insertion_times) {
  const auto [items_a, items_b] = test_tables::CheckSameState(a, b, same_insertion_times);
  for (size_t i = 0; i < items_a.size(); ++i) {
    RESOUND_CHECK(items_a[i].item->chunks()[0] == items_b[i].item->chunks()[0]);  // chunks shared, not copied
  }
}

void RestoredTablesBehaveLikeTheOriginal(SelectorKind sampler, SelectorKind remover, uint64_t seed) {
  auto store = std::make_shared<ChunkStore>();
  std::vector<std::shared_ptr<const Chunk>> chunks;
  Table original(Config(sampler, remover), store);
  Drive(original, *store, chunks, seed, 300, 1);
  Table restored(Config(sampler, remover), store);
  restored.Restore(original.Checkpoint());
  CheckSameState(original, restored, true);
  const bool deterministic = sampler != SelectorKind::kUniform && sampler != SelectorKind::kPrioritized &&
                             remover != SelectorKind::kUniform && remover != SelectorKind::kPrioritized;
  if (deterministic) {
    // The same future for both: same operations, same outcomes.
    const auto trace_a = Drive(original, *store, chunks, seed + 1, 300, 100000);
    const auto trace_b = Drive(restored, *store, chunks, seed + 1, 300, 100000);
    RESOUND_CHECK(trace_a == trace_b);
    CheckSameState(original, restored, false);  // items inserted since differ in time only
  }
}

void RestoreRefusesWhatItCannotHold() {
  auto store = std::make_shared<ChunkStore>();
  std::vector<std::shared_ptr<const Chunk>> chunks;
  Table source(Config(SelectorKind::kFifo, SelectorKind::kFifo), store);
  Drive(source, *store, chunks, 7, 200, 1);
  const TableState state = source.Checkpoint();
  RESOUND_CHECK(!state.entries.empty());

  TableConfig small = Config(SelectorKind::kFifo, SelectorKind::kFifo);
  small.max_size = static_cast<int64_t>(state.entries.size()) - 1;
  Table too_small(small, store);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { too_small.Restore(state); }));
  RESOUND_CHECK(too_small.size() == 0);

  TableState duplicated = state;
  duplicated.entries.push_back(duplicated.entries.front());
  Table target(Config(SelectorKind::kFifo, SelectorKind::kFifo), store);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { target.Restore(duplicated); }));
  TableState negative = state;
  negative.entries.front().priority = -1.0;  // Fifo takes any priority...
  Table prioritized(Config(SelectorKind::kPrioritized, SelectorKind::kFifo), store);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { prioritized.Restore(negative); }));  // ...Prioritized not
  RESOUND_CHECK(prioritized.size() == 0);

  target.Restore(state);
  RESOUND_CHECK(Throws<FailedPreconditionError>([&] { target.Restore(state); }));  // not empty
  RESOUND_CHECK(target.size() == static_cast<int64_t>(state.entries.size()));
}

}  // namespace
}  // namespace resound

int main() {
  using resound::SelectorKind;
  const SelectorKind kinds[] = {SelectorKind::kUniform, SelectorKind::kPrioritized, SelectorKind::kFifo,
                                SelectorKind::kLifo,    SelectorKind::kMinHeap,     SelectorKind::kMaxHeap};
  uint64_t seed = 1;
  for (const auto sampler : kinds) {
    for (const auto remover : {SelectorKind::kFifo, SelectorKind::kLifo, SelectorKind::kMinHeap, SelectorKind::kMaxHeap}) {
      resound::RestoredTablesBehaveLikeTheOriginal(sampler, remover, seed++);
    }
  }
  resound::RestoreRefusesWhatItCannotHold();
  return 0;
}

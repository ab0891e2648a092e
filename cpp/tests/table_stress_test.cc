// Concurrency stress for Table and ChunkStore, meant to run under
// ThreadSanitizer and AddressSanitizer (see CMakePresets.json). Writers,
// samplers, a mutator, an info reader and a resetter hammer tables that share
// one chunk store; invariants are checked while they run and at the end. The
// work is bounded by counts, never by time.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "check.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/table.h"

namespace resound {
namespace {

constexpr int kWriters = 4;
constexpr int kItemsPerWriter = 3000;
constexpr int kSamplers = 2;
constexpr int64_t kMaxSize = 500;

std::shared_ptr<const Chunk> AddChunk(ChunkStore& store, uint64_t key, uint64_t episode) {
  ChunkMetadata metadata;
  metadata.key = key;
  metadata.dtype = DType::Parse("<f4");
  metadata.step_shape = {4};
  metadata.num_steps = 5;
  metadata.episode_id = episode;
  metadata.start_step = 0;
  metadata.end_step = 4;
  metadata.uncompressed_size = Chunk::RawSize(metadata);
  std::vector<std::byte> payload(static_cast<size_t>(metadata.uncompressed_size));
  for (size_t i = 0; i < payload.size(); ++i) payload.data()[i] = std::byte(i & 0xff);
  return store.Insert(metadata, payload);
}

void CheckInfo(const Table& table) {
  const TableInfo info = table.Info();
  RESOUND_CHECK(info.current_size <= info.max_size);
  const auto& counters = info.rate_limiter.counters;
  RESOUND_CHECK(counters.inserts - counters.deletes == info.current_size);
  RESOUND_CHECK(info.num_chunks <= info.current_size * 2);
}

void RunScenario(SelectorKind sampler, SelectorKind remover, RateLimiterConfig limiter,
                 int32_t max_times_sampled) {
  auto store = std::make_shared<ChunkStore>();
  TableConfig config;
  config.name = "stress";
  config.sampler = {sampler, 0.8, 1};
  config.remover = {remover, 0.8, 2};
  config.max_size = kMaxSize;
  config.max_times_sampled = max_times_sampled;
  config.rate_limiter = limiter;
  Table table(config, store);

  std::atomic<int> writers_done{0};
  std::atomic<int64_t> samples_received{0};
  std::vector<std::thread> threads;

  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kItemsPerWriter; ++i) {
        const uint64_t base = (static_cast<uint64_t>(w) << 32) | static_cast<uint64_t>(i);
        // Two chunks per item, the second shared with the next item.
        auto a = AddChunk(*store, base * 2 + 1, static_cast<uint64_t>(w));
        auto b = AddChunk(*store, base * 2 + 2, static_cast<uint64_t>(w));
        ItemRequest request{base, 1.0 + (i % 7), {{{{a->key(), 1, 3}}, false}, {{{b->key(), 0, 1}}, true}}};
        try {
          table.Insert(std::move(request), Deadline::AfterSeconds(30));
        } catch (const CancelledError&) {
          break;
        }
        if (i % 97 == 0) CheckInfo(table);
      }
      writers_done.fetch_add(1);
    });
  }
  for (int s = 0; s < kSamplers; ++s) {
    threads.emplace_back([&] {
      while (true) {
        try {
          auto samples = table.Sample(16, Deadline::AfterSeconds(30));
          for (const auto& sample : samples) {
            RESOUND_CHECK(sample.item->chunks().size() == 2);
            RESOUND_CHECK(sample.times_sampled >= 1);
            RESOUND_CHECK(sample.probability > 0 && sample.probability <= 1.0);
            // Reading the payload of a sampled item must be safe even if the
            // item has been evicted meanwhile.
            const auto& chunk = sample.item->chunks().front();
            RESOUND_CHECK(chunk->data()[0] == std::byte(0));
          }
          samples_received.fetch_add(static_cast<int64_t>(samples.size()));
        } catch (const CancelledError&) {
          return;
        }
      }
    });
  }
  threads.emplace_back([&] {
    for (uint64_t round = 0; writers_done.load() < kWriters; ++round) {
      std::vector<std::pair<uint64_t, double>> updates;
      for (uint64_t k = 0; k < 32; ++k) updates.emplace_back((k % kWriters) << 32 | (round * 7 + k) % kItemsPerWriter, 2.0);
      std::vector<uint64_t> deletes = {(round % kWriters) << 32 | (round * 13) % kItemsPerWriter};
      table.MutatePriorities(updates, deletes);
      CheckInfo(table);
      if (round % 50 == 49) table.Snapshot();
      std::this_thread::yield();
    }
  });

  for (int i = 0; i < kWriters; ++i) threads[i].join();
  // Writers are done: close the table so samplers blocked by the limiter
  // finish, then check the final counters.
  table.Close();
  for (size_t i = kWriters; i < threads.size(); ++i) threads[i].join();
  CheckInfo(table);
  const TableInfo info = table.Info();
  RESOUND_CHECK(info.rate_limiter.counters.samples == samples_received.load());
  table.Reset();
  RESOUND_CHECK(table.Info().current_size == 0);
  RESOUND_CHECK(table.Info().memory_bytes == 0);
  std::printf("sampler=%s remover=%s: %lld samples, %lld inserts, %lld deletes\n",
              config.sampler.kind_name().c_str(), config.remover.kind_name().c_str(),
              static_cast<long long>(info.rate_limiter.counters.samples),
              static_cast<long long>(info.rate_limiter.counters.inserts),
              static_cast<long long>(info.rate_limiter.counters.deletes));
}

}  // namespace
}  // namespace resound

int main() {
  using resound::RateLimiterConfig;
  using resound::SelectorKind;
  resound::RunScenario(SelectorKind::kPrioritized, SelectorKind::kFifo,
                       RateLimiterConfig::SampleToInsertRatio(2.0, 10, 400.0), 0);
  resound::RunScenario(SelectorKind::kUniform, SelectorKind::kMinHeap, RateLimiterConfig::MinSize(10), 5);
  resound::RunScenario(SelectorKind::kFifo, SelectorKind::kFifo, RateLimiterConfig::Queue(100), 1);
  resound::RunScenario(SelectorKind::kLifo, SelectorKind::kMaxHeap, RateLimiterConfig::MinSize(1), 3);
  std::printf("table_stress_test: OK\n");
  return 0;
}

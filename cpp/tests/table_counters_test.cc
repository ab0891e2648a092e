// The counters TableInfo carries for monitoring: the keys MutatePriorities
// updated and deleted (only those it found), and the seconds inserts and
// samples spent blocked by the rate limiter, waits in the core and waits
// noted from outside (NoteExternalWait) alike, ongoing waits included.
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "check.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/table.h"
#include "resound/wake_signal.h"

namespace resound {
namespace {

using Clock = std::chrono::steady_clock;

void Insert(Table& table, ChunkStore& store, uint64_t key, double timeout_seconds = 5) {
  ChunkMetadata metadata;
  metadata.key = key;
  metadata.step_shape = {1};
  metadata.num_steps = 1;
  metadata.episode_id = key;
  metadata.uncompressed_size = Chunk::RawSize(metadata);
  std::vector<std::byte> payload(static_cast<size_t>(metadata.uncompressed_size));
  auto chunk = store.Insert(metadata, payload);
  table.Insert(ItemRequest{key, 1.0, {{{{chunk->key(), 0, 1}}, false}}}, Deadline::AfterSeconds(timeout_seconds));
}

std::unique_ptr<Table> QueueTable(std::shared_ptr<ChunkStore> store, int64_t size) {
  TableConfig config;
  config.name = "queue";
  config.sampler = {SelectorKind::kFifo, 1.0, 0};
  config.remover = {SelectorKind::kFifo, 1.0, 0};
  config.max_size = size;
  config.rate_limiter = RateLimiterConfig::Queue(size);
  return std::make_unique<Table>(config, std::move(store));
}

// Spins until at least `seconds` have passed on the steady clock (a
// measurement, not a synchronisation).
void Pass(double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
  }
}

void TestMutationsAreCounted() {
  auto store = std::make_shared<ChunkStore>();
  auto table = QueueTable(store, 10);
  for (uint64_t key = 1; key <= 4; ++key) Insert(*table, *store, key);
  RESOUND_CHECK(table->Info().num_priority_updates == 0);
  RESOUND_CHECK(table->Info().num_mutate_deletes == 0);
  // Key 99 is absent: neither its update nor its delete counts.
  table->MutatePriorities({{1, 2.0}, {2, 3.0}, {99, 1.0}}, {3, 99});
  RESOUND_CHECK(table->Info().num_priority_updates == 2);
  RESOUND_CHECK(table->Info().num_mutate_deletes == 1);
  table->MutatePriorities({{1, 5.0}}, {});
  RESOUND_CHECK(table->Info().num_priority_updates == 3);
  // The rate limiter's deletes count every removal; these only the mutations'.
  RESOUND_CHECK(table->Info().rate_limiter.counters.deletes == 1);
  // Since creation: a reset keeps them (the limiter's counters start over).
  table->Reset();
  RESOUND_CHECK(table->Info().num_priority_updates == 3);
  RESOUND_CHECK(table->Info().num_mutate_deletes == 1);
}

void TestCoreWaitsAddBlockedSeconds() {
  auto store = std::make_shared<ChunkStore>();
  auto table = QueueTable(store, 1);
  RESOUND_CHECK(table->Info().rate_limiter.blocked_sample_seconds == 0.0);
  // An empty queue holds the sample up until its deadline.
  RESOUND_CHECK(Throws<DeadlineExceededError>([&] { table->Sample(1, Deadline::AfterSeconds(0.02)); }));
  const RateLimiterInfo after_sample = table->Info().rate_limiter;
  RESOUND_CHECK(after_sample.blocked_samples == 1);
  RESOUND_CHECK(after_sample.blocked_sample_seconds >= 0.02);
  RESOUND_CHECK(after_sample.blocked_insert_seconds == 0.0);
  // A full queue holds the insert up.
  Insert(*table, *store, 1);
  RESOUND_CHECK(Throws<DeadlineExceededError>([&] { Insert(*table, *store, 2, 0.02); }));
  const RateLimiterInfo after_insert = table->Info().rate_limiter;
  RESOUND_CHECK(after_insert.blocked_inserts == 1);
  RESOUND_CHECK(after_insert.blocked_insert_seconds >= 0.02);
  RESOUND_CHECK(after_insert.blocked_sample_seconds == after_sample.blocked_sample_seconds);
}

void TestExternalWaitsAddBlockedSeconds() {
  auto store = std::make_shared<ChunkStore>();
  auto table = QueueTable(store, 1);
  // Two calls waiting together for 10 ms count 20 ms.
  table->NoteExternalWait(WakeSignal::kSamples, 1);
  table->NoteExternalWait(WakeSignal::kSamples, 1);
  Pass(0.01);
  // Ongoing waits show before they end, and keep growing.
  const double ongoing = table->Info().rate_limiter.blocked_sample_seconds;
  RESOUND_CHECK(ongoing >= 0.02);
  Pass(0.001);
  RESOUND_CHECK(table->Info().rate_limiter.blocked_sample_seconds > ongoing);
  table->NoteExternalWait(WakeSignal::kSamples, -1);
  table->NoteExternalWait(WakeSignal::kSamples, -1);
  const double ended = table->Info().rate_limiter.blocked_sample_seconds;
  // Nobody waits now: the figure stands still.
  Pass(0.005);
  RESOUND_CHECK(table->Info().rate_limiter.blocked_sample_seconds == ended);
  RESOUND_CHECK(table->Info().rate_limiter.blocked_samples == 2);
  RESOUND_CHECK(table->Info().rate_limiter.blocked_insert_seconds == 0.0);
}

}  // namespace
}  // namespace resound

int main() {
  resound::TestMutationsAreCounted();
  resound::TestCoreWaitsAddBlockedSeconds();
  resound::TestExternalWaitsAddBlockedSeconds();
  return 0;
}

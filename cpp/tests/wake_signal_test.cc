// The event-driven waits of a table (resound/wake_signal.h): a side armed
// while it is held up raises its bit, and only then; a side that may proceed
// refuses to arm; closing the table raises whatever is armed. Run under the
// sanitizers with the other C++ tests.
#include <poll.h>

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "check.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/table.h"
#include "resound/wake_signal.h"

namespace resound {
namespace {

bool Readable(int fd) {
  pollfd watched{fd, POLLIN, 0};
  return poll(&watched, 1, 0) == 1;
}

std::shared_ptr<const Chunk> AddChunk(ChunkStore& store, uint64_t key) {
  ChunkMetadata metadata;
  metadata.key = key;
  metadata.step_shape = {1};
  metadata.num_steps = 1;
  metadata.episode_id = key;
  metadata.uncompressed_size = Chunk::RawSize(metadata);
  std::vector<std::byte> payload(static_cast<size_t>(metadata.uncompressed_size));
  return store.Insert(metadata, payload);
}

void Insert(Table& table, ChunkStore& store, uint64_t key) {
  auto chunk = AddChunk(store, key);
  table.Insert(ItemRequest{key, 1.0, {{{{chunk->key(), 0, 1}}, false}}}, Deadline::AfterSeconds(5));
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

void TestSignalAlone() {
  WakeSignal signal;
  RESOUND_CHECK(!Readable(signal.fd()));
  signal.Raise(WakeSignal::kSamples);
  signal.Raise(WakeSignal::kInserts);
  RESOUND_CHECK(Readable(signal.fd()));
  RESOUND_CHECK(signal.Take() == (WakeSignal::kSamples | WakeSignal::kInserts));
  RESOUND_CHECK(!Readable(signal.fd()));
  RESOUND_CHECK(signal.Take() == 0);
}

void TestArmedSidesRaiseWhenAllowed() {
  auto store = std::make_shared<ChunkStore>();
  auto table = QueueTable(store, 1);
  const int fd = table->wake_fd();
  // Empty queue: samples are held up and arm; inserts may proceed and do not.
  RESOUND_CHECK(table->ArmWake(WakeSignal::kSamples));
  RESOUND_CHECK(!table->ArmWake(WakeSignal::kInserts));
  RESOUND_CHECK(!Readable(fd));
  Insert(*table, *store, 1);
  RESOUND_CHECK(Readable(fd));
  RESOUND_CHECK(table->TakeWakes() == WakeSignal::kSamples);
  // Disarmed once raised: more changes raise nothing.
  RESOUND_CHECK(table->Sample(1, Deadline::AfterSeconds(0)).size() == 1);
  Insert(*table, *store, 2);
  RESOUND_CHECK(!Readable(fd));
  // Full queue: inserts arm, and a sample frees the room.
  RESOUND_CHECK(table->ArmWake(WakeSignal::kInserts));
  RESOUND_CHECK(table->Sample(1, Deadline::AfterSeconds(0)).size() == 1);
  RESOUND_CHECK(table->TakeWakes() == WakeSignal::kInserts);
}

void TestCloseRaisesArmedSides() {
  auto store = std::make_shared<ChunkStore>();
  auto table = QueueTable(store, 1);
  RESOUND_CHECK(table->ArmWake(WakeSignal::kSamples));
  table->Close();
  RESOUND_CHECK(table->TakeWakes() == WakeSignal::kSamples);
  // A closed table lets every waiter through (to fail with CancelledError).
  RESOUND_CHECK(!table->ArmWake(WakeSignal::kSamples));
  RESOUND_CHECK(!table->ArmWake(WakeSignal::kInserts));
}

void TestExternalWaitsShowInInfo() {
  auto store = std::make_shared<ChunkStore>();
  auto table = QueueTable(store, 1);
  table->NoteExternalWait(WakeSignal::kSamples, 1);
  RESOUND_CHECK(table->Info().rate_limiter.waiting_samples == 1);
  RESOUND_CHECK(table->Info().rate_limiter.blocked_samples == 1);
  table->NoteExternalWait(WakeSignal::kSamples, -1);
  RESOUND_CHECK(table->Info().rate_limiter.waiting_samples == 0);
  RESOUND_CHECK(table->Info().rate_limiter.blocked_samples == 1);  // ever blocked: stays
  RESOUND_CHECK(table->Info().rate_limiter.waiting_inserts == 0);
}

void TestNoWakeIsLostAcrossThreads() {
  // A waiter that arms after each failed try is always raised by an
  // inserter on another thread: every sample it waits for arrives.
  auto store = std::make_shared<ChunkStore>();
  auto table = QueueTable(store, 4);
  constexpr int kItems = 2000;
  std::thread inserter([&] {
    for (int i = 1; i <= kItems; ++i) Insert(*table, *store, static_cast<uint64_t>(i));
  });
  int taken = 0;
  while (taken < kItems) {
    try {
      taken += static_cast<int>(table->Sample(kItems, Deadline::AfterSeconds(0)).size());
      continue;
    } catch (const DeadlineExceededError&) {
    }
    if (!table->ArmWake(WakeSignal::kSamples)) continue;
    pollfd watched{table->wake_fd(), POLLIN, 0};
    RESOUND_CHECK(poll(&watched, 1, 10000) == 1);  // a lost wake would hang here
    table->TakeWakes();
  }
  inserter.join();
  RESOUND_CHECK(taken == kItems);
}

}  // namespace
}  // namespace resound

int main() {
  resound::TestSignalAlone();
  resound::TestArmedSidesRaiseWhenAllowed();
  resound::TestCloseRaisesArmedSides();
  resound::TestExternalWaitsShowInInfo();
  resound::TestNoWakeIsLostAcrossThreads();
  return 0;
}

// VectorWriter: each environment's items slice its own newest steps within
// its episode and its own chunks; items wait for complete chunks, and the
// writing calls insert them once ready; a table that refuses one item
// (signature, closed) or holds items back (rate limiter) costs no other
// item; bad steps change nothing.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "check.h"
#include "resound/chunk_store.h"
#include "resound/column_spec.h"
#include "resound/errors.h"
#include "resound/table.h"
#include "resound/vector_writer.h"

namespace resound {
namespace {

constexpr int64_t kEnvs = 3;

TableConfig FifoConfig(int64_t max_size, RateLimiterConfig limiter) {
  TableConfig config;
  config.name = "fifo";
  config.sampler = {SelectorKind::kFifo, 0.0, 1};
  config.remover = {SelectorKind::kFifo, 0.0, 2};
  config.max_size = max_size;
  config.max_times_sampled = 1;  // each sample takes the oldest item out
  config.rate_limiter = limiter;
  return config;
}

// One int32 per environment: env * 1000 + step.
std::vector<int32_t> Rows(int32_t step) {
  std::vector<int32_t> rows;
  for (int32_t env = 0; env < kEnvs; ++env) rows.push_back(env * 1000 + step);
  return rows;
}

void Append(VectorWriter& writer, const std::vector<int32_t>& rows) {
  const std::span<const std::byte> column(reinterpret_cast<const std::byte*>(rows.data()), rows.size() * 4);
  writer.Append(std::span<const std::span<const std::byte>>(&column, 1));
}

std::vector<int32_t> Values(const Item& item) {
  std::vector<int32_t> values;
  for (const ChunkSlice& slice : item.trajectory()[0].slices) {
    for (const auto& chunk : item.chunks()) {
      if (chunk->key() != slice.chunk_key) continue;
      for (int64_t row = slice.offset; row < slice.offset + slice.length; ++row) {
        int32_t value = 0;
        std::memcpy(&value, chunk->data() + row * 4, 4);
        values.push_back(value);
      }
    }
  }
  return values;
}

std::vector<VectorWriter::ColumnFormat> OneInt32() { return {{DType::Parse("<i4"), {}}}; }

void ItemsAreEachEnvironmentsNewestSteps() {
  auto store = std::make_shared<ChunkStore>();
  auto table = std::make_shared<Table>(FifoConfig(1000, RateLimiterConfig::MinSize(1)), store);
  VectorWriter writer(store, kEnvs, OneInt32(), 3, 2);
  const double one = 1.0;
  for (int32_t step = 0; step < 5; ++step) {
    Append(writer, Rows(step));
    // Fewer than 2 steps at first: no item.
    RESOUND_CHECK(writer.CreateItems(table, 2, {&one, 1}, {}).created == (step >= 1 ? kEnvs : 0));
  }
  // Chunks of 2: steps 4's chunk is open, so the last items wait; the
  // writing calls inserted the others as their chunks completed.
  RESOUND_CHECK(writer.num_queued() == kEnvs);
  RESOUND_CHECK(writer.num_ready() == 0);
  RESOUND_CHECK(table->size() == 3 * kEnvs);
  writer.CompleteChunks();
  RESOUND_CHECK(writer.InsertReady(Deadline::AfterSeconds(0)) == kEnvs);
  RESOUND_CHECK(writer.num_queued() == 0);
  RESOUND_CHECK(table->size() == 4 * kEnvs);
  std::vector<int> seen(kEnvs * 5, 0);
  for (int i = 0; i < 4 * kEnvs; ++i) {
    const auto sampled = table->Sample(1, Deadline::AfterSeconds(0));
    const std::vector<int32_t> values = Values(*sampled.front().item);
    RESOUND_CHECK(values.size() == 2);
    RESOUND_CHECK(values[1] == values[0] + 1);  // two consecutive steps of one environment
    ++seen[static_cast<size_t>(values[0] / 1000 * 5 + values[0] % 1000)];
  }
  for (int env = 0; env < kEnvs; ++env) {
    for (int first = 0; first < 4; ++first) RESOUND_CHECK(seen[static_cast<size_t>(env * 5 + first)] == 1);
  }
}

void EpisodesEndPerEnvironment() {
  auto store = std::make_shared<ChunkStore>();
  auto table = std::make_shared<Table>(FifoConfig(1000, RateLimiterConfig::MinSize(1)), store);
  VectorWriter writer(store, kEnvs, OneInt32(), 2, 4);
  const double one = 1.0;
  Append(writer, Rows(0));
  const std::vector<uint8_t> first_only = {1, 0, 0};
  writer.EndEpisodes(first_only);
  Append(writer, Rows(1));
  RESOUND_CHECK((writer.episode_steps() == std::vector<int64_t>{1, 2, 2}));
  // Environment 0's new episode has one step: no item crosses its boundary.
  const VectorWriter::Written created = writer.CreateItems(table, 2, {&one, 1}, {});
  RESOUND_CHECK(created.created == 2 && created.queued == 2);  // their chunks are open
  // Ending the episodes completes the chunks, and the call inserts the items.
  RESOUND_CHECK(writer.EndEpisodes({}).queued == 0);
  const TableInfo info = table->Info();
  RESOUND_CHECK(info.current_size == 2);
  RESOUND_CHECK(info.num_episodes == 2);  // environments 1 and 2, one chunk each
  RESOUND_CHECK(info.num_chunks == 2);
}

void ARefusedItemCostsNoOther() {
  auto store = std::make_shared<ChunkStore>();
  TableConfig config = FifoConfig(1000, RateLimiterConfig::MinSize(1));
  config.column_specs.emplace_back("<f4", std::nullopt);  // the writer writes int32
  auto refusing = std::make_shared<Table>(config, store);
  auto table = std::make_shared<Table>(FifoConfig(1000, RateLimiterConfig::MinSize(1)), store);
  VectorWriter writer(store, kEnvs, OneInt32(), 1, 1);
  const double one = 1.0;
  Append(writer, Rows(0));
  // Chunks of one step complete at once: the refusal comes with the call.
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { writer.CreateItems(refusing, 1, {&one, 1}, {}); }));
  RESOUND_CHECK(writer.num_queued() == 0);
  const VectorWriter::Written written = writer.CreateItems(table, 1, {&one, 1}, {});
  RESOUND_CHECK(written.created == kEnvs && written.queued == 0);
  RESOUND_CHECK(refusing->size() == 0 && table->size() == kEnvs);
}

void AnInsertErrorComesWithTheCallThatMadeTheItemReady() {
  auto store = std::make_shared<ChunkStore>();
  auto table = std::make_shared<Table>(FifoConfig(1000, RateLimiterConfig::MinSize(1)), store);
  VectorWriter writer(store, kEnvs, OneInt32(), 1, 2);
  const double one = 1.0;
  Append(writer, Rows(0));
  RESOUND_CHECK(writer.CreateItems(table, 1, {&one, 1}, {}).queued == kEnvs);  // the chunks are open
  table->Close();
  // The step completes the chunks: the closed table refuses the first item,
  // which goes; the others stay queued.
  RESOUND_CHECK(Throws<CancelledError>([&] { Append(writer, Rows(1)); }));
  RESOUND_CHECK((writer.episode_steps() == std::vector<int64_t>{2, 2, 2}));
  RESOUND_CHECK(writer.num_queued() == kEnvs - 1);
  RESOUND_CHECK(writer.num_ready() == kEnvs - 1);
}

void HeldBackItemsStayQueuedInOrder() {
  auto store = std::make_shared<ChunkStore>();
  auto table = std::make_shared<Table>(FifoConfig(2, RateLimiterConfig::Queue(2)), store);
  VectorWriter writer(store, kEnvs, OneInt32(), 1, 1);
  const double one = 1.0;
  Append(writer, Rows(0));
  const VectorWriter::Written written = writer.CreateItems(table, 1, {&one, 1}, {});
  // The queue holds 2: the call inserted them and left the third.
  RESOUND_CHECK(written.created == kEnvs && written.queued == 1);
  RESOUND_CHECK(table->size() == 2 && writer.num_ready() == 1);
  RESOUND_CHECK(writer.InsertReady(Deadline::AfterSeconds(0)) == 0);  // still full
  RESOUND_CHECK(Values(*table->Sample(1, Deadline::AfterSeconds(0)).front().item).front() == 0);
  RESOUND_CHECK(writer.InsertReady(Deadline::AfterSeconds(0)) == 1);
  RESOUND_CHECK(Values(*table->Sample(1, Deadline::AfterSeconds(0)).front().item).front() == 1000);
  RESOUND_CHECK(Values(*table->Sample(1, Deadline::AfterSeconds(0)).front().item).front() == 2000);
}

void BadCallsChangeNothing() {
  auto store = std::make_shared<ChunkStore>();
  auto table = std::make_shared<Table>(FifoConfig(10, RateLimiterConfig::MinSize(1)), store);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { VectorWriter(store, 0, OneInt32(), 1, 1); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { VectorWriter(store, 1, {}, 1, 1); }));
  VectorWriter writer(store, kEnvs, OneInt32(), 2, 2);
  const std::vector<int32_t> short_rows = {1, 2};
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { Append(writer, short_rows); }));
  RESOUND_CHECK((writer.episode_steps() == std::vector<int64_t>{0, 0, 0}));
  Append(writer, Rows(0));
  const double one = 1.0;
  const double bad = 1.0 / 0.0;
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { writer.CreateItems(table, 3, {&one, 1}, {}); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { writer.CreateItems(table, 1, {&bad, 1}, {}); }));
  const std::vector<uint8_t> two_flags = {1, 1};
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { writer.CreateItems(table, 1, {&one, 1}, two_flags); }));
  RESOUND_CHECK(writer.num_queued() == 0);
}

}  // namespace
}  // namespace resound

int main() {
  resound::ItemsAreEachEnvironmentsNewestSteps();
  resound::EpisodesEndPerEnvironment();
  resound::ARefusedItemCostsNoOther();
  resound::AnInsertErrorComesWithTheCallThatMadeTheItemReady();
  resound::HeldBackItemsStayQueuedInOrder();
  resound::BadCallsChangeNothing();
  std::printf("vector_writer_test: ok\n");
  return 0;
}

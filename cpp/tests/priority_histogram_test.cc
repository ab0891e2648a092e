// Table::HistogramOfPriorities against counts worked out by hand: spread
// priorities, equal ones, an empty table, negative and extreme priorities,
// priorities changed and items deleted by MutatePriorities, and bad bins.
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "check.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/table.h"

namespace resound {
namespace {

// A table of items over one shared chunk, with the given priorities (keys
// 1, 2, ...).
std::unique_ptr<Table> TableWith(const std::vector<double>& priorities) {
  auto store = std::make_shared<ChunkStore>();
  ChunkMetadata metadata;
  metadata.key = 7;
  metadata.dtype = DType::Parse("<f4");
  metadata.step_shape = {1};
  metadata.num_steps = 1;
  metadata.end_step = 0;
  metadata.uncompressed_size = Chunk::RawSize(metadata);
  std::vector<std::byte> payload(static_cast<size_t>(metadata.uncompressed_size));
  const auto chunk = store->Insert(metadata, payload);
  TableConfig config;
  config.name = "histogram";
  config.sampler = {SelectorKind::kUniform, 0.0, 1};
  config.remover = {SelectorKind::kFifo, 0.0, 2};
  config.max_size = 1000;
  config.rate_limiter.max_diff = 1e9;
  config.rate_limiter.min_diff = -1e9;
  auto table = std::make_unique<Table>(config, store);
  uint64_t key = 0;
  for (const double priority : priorities) {
    table->Insert({++key, priority, {{{{chunk->key(), 0, 1}}, false}}}, Deadline::AfterSeconds(5));
  }
  return table;
}

void TestSpreadPriorities() {
  // Range [0, 10] in 5 bins of width 2: [0,2) [2,4) [4,6) [6,8) [8,10].
  const auto table = TableWith({0, 1, 2, 3.9, 5, 10, 10, 8});
  const PriorityHistogram histogram = table->HistogramOfPriorities(5);
  RESOUND_CHECK(histogram.min == 0 && histogram.max == 10);
  RESOUND_CHECK((histogram.counts == std::vector<int64_t>{2, 2, 1, 0, 3}));
}

void TestEqualAndEmpty() {
  const auto equal = TableWith({2.5, 2.5, 2.5});
  const PriorityHistogram one = equal->HistogramOfPriorities(10);
  RESOUND_CHECK(one.min == 2.5 && one.max == 2.5);
  RESOUND_CHECK((one.counts == std::vector<int64_t>{3}));
  const auto empty = TableWith({});
  RESOUND_CHECK(empty->HistogramOfPriorities(10).counts.empty());
}

void TestNegativeAndExtremePriorities() {
  const double big = std::numeric_limits<double>::max();
  // max - min overflows a double here; each item must still find its bin.
  const auto table = TableWith({-big, big, -big / 4, big / 4});
  const PriorityHistogram histogram = table->HistogramOfPriorities(2);
  RESOUND_CHECK(histogram.min == -big && histogram.max == big);
  RESOUND_CHECK((histogram.counts == std::vector<int64_t>{2, 2}));
  const double tiny = std::numeric_limits<double>::denorm_min();
  const PriorityHistogram denormals = TableWith({0, tiny})->HistogramOfPriorities(4);
  int64_t total = 0;
  for (const int64_t count : denormals.counts) total += count;
  RESOUND_CHECK(total == 2 && denormals.counts.size() == 4);
}

void TestFollowsMutations() {
  const auto table = TableWith({1, 1, 1, 1});
  table->MutatePriorities({{1, 5.0}, {2, 3.0}}, {3});
  // Left: 5, 3, 1 in [1, 5], 2 bins: [1,3) [3,5].
  const PriorityHistogram histogram = table->HistogramOfPriorities(2);
  RESOUND_CHECK(histogram.min == 1 && histogram.max == 5);
  RESOUND_CHECK((histogram.counts == std::vector<int64_t>{1, 2}));
}

void TestBadBins() {
  const auto table = TableWith({1});
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { table->HistogramOfPriorities(0); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { table->HistogramOfPriorities(Table::kMaxHistogramBins + 1); }));
  RESOUND_CHECK(table->HistogramOfPriorities(Table::kMaxHistogramBins).counts.size() == 1);
}

}  // namespace
}  // namespace resound

int main() {
  resound::TestSpreadPriorities();
  resound::TestEqualAndEmpty();
  resound::TestNegativeAndExtremePriorities();
  resound::TestFollowsMutations();
  resound::TestBadBins();
  return 0;
}

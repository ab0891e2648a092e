// PlanColumn and GatherColumn on hand-built items: the stacked bytes are
// compared with the rows cut out of the chunk payloads directly, and every
// reason to refuse the fast path is checked to give std::nullopt rather than
// an error or a wrong array.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "check.h"
#include "resound/chunk_store.h"
#include "resound/column_gather.h"
#include "resound/errors.h"
#include "resound/item.h"

namespace resound {
namespace {

struct ChunkSpec {
  uint64_t key = 0;
  std::string dtype = "<f4";
  std::vector<int64_t> step_shape = {3};
  int64_t num_steps = 4;
  Compression compression = Compression::kNone;
  bool delta_encoded = false;
};

// Payload bytes depend on the key so that rows of different chunks differ.
std::shared_ptr<const Chunk> AddChunk(ChunkStore& store, const ChunkSpec& spec) {
  ChunkMetadata metadata;
  metadata.key = spec.key;
  metadata.dtype = DType::Parse(spec.dtype);
  metadata.step_shape = spec.step_shape;
  metadata.num_steps = spec.num_steps;
  metadata.compression = spec.compression;
  metadata.delta_encoded = spec.delta_encoded;
  metadata.end_step = spec.num_steps - 1;
  metadata.uncompressed_size = Chunk::RawSize(metadata);
  std::vector<std::byte> payload(static_cast<size_t>(metadata.uncompressed_size));
  for (size_t i = 0; i < payload.size(); ++i) payload.data()[i] = std::byte((spec.key * 31 + i) & 0xff);
  return store.Insert(metadata, payload);
}

SampledItem Sample(const ChunkStore& store, uint64_t key, Trajectory trajectory) {
  SampledItem sample;
  sample.item = Item::Create(key, std::move(trajectory), store);
  return sample;
}

// What the gather must produce: each sample's slices cut from the payloads
// with plain offsets, concatenated.
std::vector<std::byte> Expected(const std::vector<SampledItem>& samples, size_t column, int64_t row_bytes) {
  std::vector<std::byte> bytes;
  for (const auto& sample : samples) {
    for (const ChunkSlice& slice : sample.item->trajectory()[column].slices) {
      const Chunk* chunk = nullptr;
      for (const auto& c : sample.item->chunks()) {
        if (c->key() == slice.chunk_key) chunk = c.get();
      }
      RESOUND_CHECK(chunk != nullptr);
      const std::byte* begin = chunk->data() + slice.offset * row_bytes;
      bytes.insert(bytes.end(), begin, begin + slice.length * row_bytes);
    }
  }
  return bytes;
}

std::vector<std::byte> Gather(const std::vector<SampledItem>& samples, size_t column, const ColumnLayout& layout) {
  std::vector<std::byte> out(samples.size() * static_cast<size_t>(layout.rows * layout.RowBytes()));
  GatherColumn(samples, column, layout, out);
  return out;
}

template <typename Fn>
bool ThrowsInvalidArgument(Fn&& fn) {
  try {
    fn();
  } catch (const InvalidArgumentError&) {
    return true;
  }
  return false;
}

void StackableColumns() {
  ChunkStore store;
  auto a = AddChunk(store, {.key = 1});
  auto b = AddChunk(store, {.key = 2, .dtype = "<i8", .step_shape = {2, 2}, .num_steps = 5});
  auto c = AddChunk(store, {.key = 3, .dtype = "<i8", .step_shape = {2, 2}, .num_steps = 5});
  // Column 0: two rows of chunk 1. Column 1: four <i8 [2, 2] rows, in the
  // second and third items spanning chunks 2 and 3.
  const std::vector<SampledItem> samples = {
      Sample(store, 10, {{{{1, 0, 2}}, false}, {{{2, 1, 4}}, false}}),
      Sample(store, 11, {{{{1, 2, 2}}, false}, {{{2, 3, 2}, {3, 0, 2}}, false}}),
      Sample(store, 12, {{{{1, 1, 2}}, false}, {{{3, 4, 1}, {2, 0, 1}, {3, 1, 2}}, false}}),
  };

  const auto first = PlanColumn(samples, 0);
  RESOUND_CHECK(first.has_value());
  RESOUND_CHECK(first->dtype.str() == "<f4" && first->rows == 2 && !first->squeeze);
  RESOUND_CHECK((first->step_shape == std::vector<int64_t>{3}));
  RESOUND_CHECK(first->RowBytes() == 12);
  RESOUND_CHECK((first->Shape(samples.size()) == std::vector<int64_t>{3, 2, 3}));
  RESOUND_CHECK(Gather(samples, 0, *first) == Expected(samples, 0, 12));

  const auto second = PlanColumn(samples, 1);
  RESOUND_CHECK(second.has_value());
  RESOUND_CHECK(second->dtype.str() == "<i8" && second->rows == 4 && second->RowBytes() == 32);
  RESOUND_CHECK((second->Shape(samples.size()) == std::vector<int64_t>{3, 4, 2, 2}));
  const auto gathered = Gather(samples, 1, *second);
  RESOUND_CHECK(gathered == Expected(samples, 1, 32));
  // Spot-check the concatenation by hand: item 11's rows 2..3 are chunk 3's rows 0..1.
  RESOUND_CHECK(std::memcmp(gathered.data() + 4 * 32 + 2 * 32, c->data(), 2 * 32) == 0);
  RESOUND_CHECK(std::memcmp(gathered.data() + 4 * 32, b->data() + 3 * 32, 2 * 32) == 0);

  RESOUND_CHECK(ThrowsInvalidArgument([&] { (void)PlanColumn(samples, 2); }));
  RESOUND_CHECK(ThrowsInvalidArgument([&] { (void)PlanColumn({}, 0); }));
}

void SqueezedColumn() {
  ChunkStore store;
  auto a = AddChunk(store, {.key = 1, .dtype = "|b1", .step_shape = {}, .num_steps = 6});
  auto b = AddChunk(store, {.key = 2, .dtype = "|b1", .step_shape = {}, .num_steps = 6});
  const std::vector<SampledItem> samples = {
      Sample(store, 10, {{{{1, 5, 1}}, true}}),
      Sample(store, 11, {{{{2, 0, 1}}, true}}),
  };
  const auto layout = PlanColumn(samples, 0);
  RESOUND_CHECK(layout.has_value() && layout->squeeze && layout->rows == 1);
  RESOUND_CHECK((layout->Shape(samples.size()) == std::vector<int64_t>{2}));
  const auto gathered = Gather(samples, 0, *layout);
  RESOUND_CHECK(gathered.size() == 2 && gathered[0] == a->data()[5] && gathered[1] == b->data()[0]);

  // Same rows but one sample squeezed and the other not: not stackable.
  const std::vector<SampledItem> mixed = {samples[0], Sample(store, 12, {{{{2, 0, 1}}, false}})};
  RESOUND_CHECK(!PlanColumn(mixed, 0).has_value());
}

void Unstackable() {
  ChunkStore store;
  auto raw = AddChunk(store, {.key = 1});
  auto lz4 = AddChunk(store, {.key = 2, .compression = Compression::kLz4});
  auto delta = AddChunk(store, {.key = 3, .delta_encoded = true});
  auto ints = AddChunk(store, {.key = 4, .dtype = "<i4"});
  auto wide = AddChunk(store, {.key = 5, .step_shape = {4}});
  const SampledItem plain = Sample(store, 10, {{{{1, 0, 2}}, false}});

  // An lz4-flagged chunk, alone or behind a raw first sample.
  RESOUND_CHECK(!PlanColumn(std::vector{Sample(store, 11, {{{{2, 0, 2}}, false}})}, 0).has_value());
  RESOUND_CHECK(!PlanColumn(std::vector{plain, Sample(store, 11, {{{{2, 0, 2}}, false}})}, 0).has_value());
  // An lz4 chunk as the second slice of an item whose first slice is raw.
  RESOUND_CHECK(!PlanColumn(std::vector{Sample(store, 11, {{{{1, 0, 1}, {2, 0, 1}}, false}})}, 0).has_value());
  // Delta encoded.
  RESOUND_CHECK(!PlanColumn(std::vector{plain, Sample(store, 12, {{{{3, 0, 2}}, false}})}, 0).has_value());
  // Differing rows.
  RESOUND_CHECK(!PlanColumn(std::vector{plain, Sample(store, 13, {{{{1, 0, 3}}, false}})}, 0).has_value());
  // Differing dtype, and differing step shape with the same dtype.
  RESOUND_CHECK(!PlanColumn(std::vector{plain, Sample(store, 14, {{{{4, 0, 2}}, false}})}, 0).has_value());
  RESOUND_CHECK(!PlanColumn(std::vector{plain, Sample(store, 15, {{{{5, 0, 2}}, false}})}, 0).has_value());
  // A later sample without the column.
  const SampledItem two_columns = Sample(store, 16, {{{{1, 0, 2}}, false}, {{{1, 0, 1}}, false}});
  RESOUND_CHECK(!PlanColumn(std::vector{two_columns, plain}, 1).has_value());
  RESOUND_CHECK(PlanColumn(std::vector{two_columns, plain}, 0).has_value());
}

void GatherRejectsMismatchedBuffers() {
  ChunkStore store;
  auto a = AddChunk(store, {.key = 1});
  const std::vector<SampledItem> samples = {Sample(store, 10, {{{{1, 0, 2}}, false}})};
  const auto layout = PlanColumn(samples, 0);
  RESOUND_CHECK(layout.has_value());
  std::vector<std::byte> short_buffer(static_cast<size_t>(2 * layout->RowBytes() - 1));
  RESOUND_CHECK(ThrowsInvalidArgument([&] { GatherColumn(samples, 0, *layout, short_buffer); }));
  // A layout claiming more rows than the items have is refused before any copy.
  ColumnLayout longer = *layout;
  longer.rows = 3;
  std::vector<std::byte> buffer(static_cast<size_t>(3 * layout->RowBytes()));
  RESOUND_CHECK(ThrowsInvalidArgument([&] { GatherColumn(samples, 0, longer, buffer); }));
}

}  // namespace
}  // namespace resound

int main() {
  resound::StackableColumns();
  resound::SqueezedColumn();
  resound::Unstackable();
  resound::GatherRejectsMismatchedBuffers();
  std::printf("column_gather_test: OK\n");
  return 0;
}

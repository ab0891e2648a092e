// Item::Create on multi-column, multi-slice trajectories: the compact
// single-allocation layout must give back exactly the trajectory it was made
// from (through the view), the distinct chunks in order of first reference,
// each column's length, and must own its chunks until it goes. Also every
// validation error.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "check.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/item.h"

namespace resound {
namespace {

std::shared_ptr<const Chunk> AddChunk(ChunkStore& store, uint64_t key, const std::string& dtype,
                                      std::vector<int64_t> shape, int64_t num_steps) {
  ChunkMetadata m;
  m.key = key;
  m.dtype = DType::Parse(dtype);
  m.step_shape = std::move(shape);
  m.num_steps = num_steps;
  m.end_step = num_steps - 1;
  m.uncompressed_size = Chunk::RawSize(m);
  std::vector<std::byte> payload(static_cast<size_t>(m.uncompressed_size), std::byte{1});
  return store.Insert(m, payload);
}

template <typename Error, typename Fn>
bool ThrowsWith(const std::string& needle, Fn&& fn) {
  try {
    fn();
  } catch (const Error& error) {
    return std::string(error.what()).find(needle) != std::string::npos;
  }
  return false;
}

void RoundTrip() {
  ChunkStore store;
  auto a = AddChunk(store, 10, "<f4", {3}, 5);
  auto b = AddChunk(store, 11, "<f4", {3}, 4);
  auto c = AddChunk(store, 12, "|b1", {}, 2);
  const Trajectory trajectory = {
      {{{10, 1, 2}, {11, 0, 3}, {10, 4, 1}}, false},
      {{{12, 1, 1}}, true},
      {{{11, 3, 1}}, false},
  };
  auto item = Item::Create(42, trajectory, store);
  RESOUND_CHECK(item->key() == 42 && item->num_columns() == 3);
  const Item::TrajectoryView view = item->trajectory();
  RESOUND_CHECK(view.size() == trajectory.size());
  for (size_t col = 0; col < trajectory.size(); ++col) {
    const Item::ColumnView column = view[col];
    RESOUND_CHECK(column.squeeze == trajectory[col].squeeze);
    RESOUND_CHECK(std::vector<ChunkSlice>(column.slices.begin(), column.slices.end()) == trajectory[col].slices);
  }
  RESOUND_CHECK(item->column_length(0) == 6 && item->column_length(1) == 1 && item->column_length(2) == 1);
  const auto chunks = item->chunks();
  RESOUND_CHECK(chunks.size() == 3 && chunks[0] == a && chunks[1] == b && chunks[2] == c);

  // The item owns its chunks: they stay in the store until it goes.
  const std::weak_ptr<const Chunk> watch = a;
  a.reset();
  b.reset();
  c.reset();
  RESOUND_CHECK(store.num_chunks() == 3 && !watch.expired());
  item.reset();
  RESOUND_CHECK(store.num_chunks() == 0 && watch.expired());
}

void Errors() {
  ChunkStore store;
  auto f = AddChunk(store, 1, "<f4", {3}, 5);
  auto i = AddChunk(store, 2, "<i4", {3}, 5);
  auto s = AddChunk(store, 3, "|S4", {}, 5);
  auto t = AddChunk(store, 4, "|S9", {}, 5);
  RESOUND_CHECK(ThrowsWith<InvalidArgumentError>("at least one column", [&] { Item::Create(1, {}, store); }));
  RESOUND_CHECK(ThrowsWith<InvalidArgumentError>("at least one slice", [&] { Item::Create(1, {{{}, false}}, store); }));
  RESOUND_CHECK(ThrowsWith<NotFoundError>("chunk 99", [&] { Item::Create(1, {{{{99, 0, 1}}, false}}, store); }));
  RESOUND_CHECK(ThrowsWith<InvalidArgumentError>("outside chunk 1", [&] { Item::Create(1, {{{{1, 4, 2}}, false}}, store); }));
  RESOUND_CHECK(ThrowsWith<InvalidArgumentError>("outside chunk 1", [&] { Item::Create(1, {{{{1, 0, 0}}, false}}, store); }));
  RESOUND_CHECK(ThrowsWith<InvalidArgumentError>("holds <i4 [3]", [&] {
    Item::Create(1, {{{{1, 0, 1}, {2, 0, 1}}, false}}, store);
  }));
  RESOUND_CHECK(ThrowsWith<InvalidArgumentError>("exactly one row", [&] { Item::Create(1, {{{{1, 0, 2}}, true}}, store); }));
  // Strings of one column may differ in width.
  RESOUND_CHECK(Item::Create(1, {{{{3, 0, 1}, {4, 0, 1}}, false}}, store)->column_length(0) == 2);
}

}  // namespace
}  // namespace resound

int main() {
  resound::RoundTrip();
  resound::Errors();
  std::printf("item_test: OK\n");
  return 0;
}

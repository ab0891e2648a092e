// ColumnChunker: rows land in chunks of the configured length with the right
// metadata; complete chunks stay alive exactly while one of their rows is in
// the keep-alive window (also across early, short chunks); bad rows and
// steps are refused without changing anything; a long run keeps exactly
// the window's chunks; resizing, clearing and
// threads hammering one chunker (a misused writer) keep it consistent.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "check.h"
#include "resound/column_chunker.h"
#include "resound/errors.h"

namespace resound {
namespace {

std::vector<std::byte> Row(int32_t a, int32_t b) {
  std::vector<std::byte> bytes(8);
  std::memcpy(bytes.data(), &a, 4);
  std::memcpy(bytes.data() + 4, &b, 4);
  return bytes;
}

int32_t FirstValue(const std::byte* data) {
  int32_t value = 0;
  std::memcpy(&value, data, 4);
  return value;
}

void ChunksOfTheConfiguredLength() {
  auto store = std::make_shared<ChunkStore>();
  ColumnChunker chunker(store, DType::Parse("<i4"), {2}, 3, 100);
  std::vector<uint64_t> keys;
  for (int step = 0; step < 7; ++step) keys.push_back(chunker.Append(Row(step, -step), 42, step));
  // Rows 0-2 and 3-5 are complete chunks; row 6 is open.
  RESOUND_CHECK(keys[0] == keys[2] && keys[3] == keys[5] && keys[0] != keys[3] && keys[6] != keys[3]);
  RESOUND_CHECK(chunker.num_kept() == 2 && chunker.open_rows() == 1 && store->num_chunks() == 2);
  const auto second = store->Find(keys[3]);
  RESOUND_CHECK(second != nullptr && second->num_steps() == 3 && second->episode_id() == 42);
  RESOUND_CHECK(second->start_step() == 3 && second->end_step() == 5 && second->dtype().str() == "<i4");
  RESOUND_CHECK(FirstValue(second->data()) == 3 && FirstValue(second->data() + 16) == 5);
  RESOUND_CHECK(store->Find(keys[6]) == nullptr);
  RESOUND_CHECK(FirstValue(chunker.OpenRow(0).data()) == 6);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { chunker.OpenRow(1); }));
  // An early finalize makes a short chunk; the next row opens a new one.
  chunker.Finalize();
  const auto short_chunk = store->Find(keys[6]);
  RESOUND_CHECK(short_chunk != nullptr && short_chunk->num_steps() == 1 && chunker.open_rows() == 0);
  chunker.Finalize();  // nothing open: no-op
  RESOUND_CHECK(chunker.num_kept() == 3);
  // Sparse steps are fine; steps going back are refused without a change.
  RESOUND_CHECK(chunker.Append(Row(9, 0), 42, 9) != keys[6]);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { chunker.Append(Row(9, 0), 42, 9); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { chunker.Append(std::vector<std::byte>(7), 42, 10); }));
  RESOUND_CHECK(chunker.open_rows() == 1);
  chunker.Append(Row(12, 0), 42, 12);
  chunker.Finalize();
  const auto sparse = store->Find(chunker.Append(Row(13, 0), 42, 13));
  RESOUND_CHECK(sparse == nullptr);  // open
  RESOUND_CHECK(store->num_chunks() == 4);
}

void KeepsChunksWhileARowIsInTheWindow() {
  auto store = std::make_shared<ChunkStore>();
  ColumnChunker chunker(store, DType::Parse("<i4"), {2}, 2, 3);
  std::vector<uint64_t> keys;
  for (int step = 0; step < 4; ++step) keys.push_back(chunker.Append(Row(step, 0), 1, step));
  // Rows 1-3 are alive: chunk [0,1] (row 1) and chunk [2,3].
  RESOUND_CHECK(chunker.num_kept() == 2 && store->Find(keys[0]) != nullptr);
  keys.push_back(chunker.Append(Row(4, 0), 1, 4));  // rows 2-4 alive: [0,1] goes
  RESOUND_CHECK(chunker.num_kept() == 1 && store->Find(keys[0]) == nullptr && store->Find(keys[2]) != nullptr);
  // Short chunks: one per row, each kept while its row is alive.
  chunker.Finalize();
  for (int step = 5; step < 8; ++step) {
    keys.push_back(chunker.Append(Row(step, 0), 1, step));
    chunker.Finalize();
  }
  // Rows 5-7 alive, in three one-row chunks; [2,3] and [4] are gone.
  RESOUND_CHECK(chunker.num_kept() == 3 && store->num_chunks() == 3);
  RESOUND_CHECK(store->Find(keys[4]) == nullptr && store->Find(keys[5]) != nullptr);
  chunker.SetKeepAlive(1);
  RESOUND_CHECK(chunker.num_kept() == 1 && store->Find(keys[7]) != nullptr && store->Find(keys[6]) == nullptr);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { chunker.SetKeepAlive(0); }));
  // A chunk someone else holds outlives the chunker letting go of it.
  const auto held = store->Find(keys[7]);
  chunker.Append(Row(8, 0), 1, 8);
  RESOUND_CHECK(Throws<FailedPreconditionError>([&] { chunker.SetMaxChunkLength(4); }));
  chunker.Clear();
  RESOUND_CHECK(chunker.num_kept() == 0 && chunker.open_rows() == 0 && store->num_chunks() == 1);
  RESOUND_CHECK(store->Find(keys[7]) == held);
  chunker.SetMaxChunkLength(1);
  chunker.SetKeepAlive(2);
  for (int step = 0; step < 5; ++step) chunker.Append(Row(step, 0), 2, step);
  RESOUND_CHECK(chunker.num_kept() == 2 && chunker.open_rows() == 0);
}

void RefusesBadConfigurations() {
  auto store = std::make_shared<ChunkStore>();
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { ColumnChunker(store, DType::Parse("<i4"), {2}, 0, 1); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { ColumnChunker(store, DType::Parse("<i4"), {2}, 1, 0); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { ColumnChunker(store, DType::Parse("<i4"), {-1}, 1, 1); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { ColumnChunker(nullptr, DType::Parse("<i4"), {2}, 1, 1); }));
  ColumnChunker empty_cells(store, DType::Parse("<f8"), {0, 3}, 2, 2);
  const uint64_t key = empty_cells.Append({}, 0, 0);
  empty_cells.Append({}, 0, 1);
  RESOUND_CHECK(store->Find(key) != nullptr && store->Find(key)->num_steps() == 2);
}

// A long run of appends, with early chunks (Finalize) and the window resized
// now and then: after every call, exactly the chunks with a row among the
// newest keep_alive rows are kept (the kept list drops from its front and
// compacts itself as it goes).
void KeepsTheWindowOverALongRun() {
  auto store = std::make_shared<ChunkStore>(4);
  ColumnChunker chunker(store, DType::Parse("<i4"), {2}, 3, 4);
  struct Made {
    uint64_t key;
    int64_t last_row;
    bool gone;  // left the window once (a larger window later does not bring it back)
  };
  std::vector<Made> made;  // complete chunks, oldest first
  int64_t keep_alive = 4;
  int64_t rows = 0;
  int64_t open = 0;
  for (int i = 0; i < 5000; ++i) {
    const uint64_t key = chunker.Append(Row(i, i), 0, i);
    ++rows;
    if (++open == 3) {
      made.push_back({key, rows - 1, false});
      open = 0;
    }
    if (i % 11 == 5 && open > 0) {
      chunker.Finalize();
      made.push_back({key, rows - 1, false});
      open = 0;
    }
    if (i % 997 == 500) {
      keep_alive = keep_alive == 4 ? 9 : 4;
      chunker.SetKeepAlive(keep_alive);
    }
    size_t alive = 0;
    for (Made& chunk : made) {
      chunk.gone = chunk.gone || chunk.last_row < rows - keep_alive;
      const bool in_window = !chunk.gone;
      alive += in_window ? 1 : 0;
      RESOUND_CHECK((store->Find(chunk.key) != nullptr) == in_window);
    }
    RESOUND_CHECK(chunker.num_kept() == alive);
    // Chunks long gone need not be checked again.
    if (made.size() > 64) made.erase(made.begin(), made.begin() + 32);
  }
  chunker.Clear();
  RESOUND_CHECK(chunker.num_kept() == 0 && store->num_chunks() == 0);
  chunker.Append(Row(1, 1), 0, 0);
  chunker.Finalize();
  RESOUND_CHECK(chunker.num_kept() == 1 && store->num_chunks() == 1);
}

void ConcurrentAppends() {
  auto store = std::make_shared<ChunkStore>(4);
  ColumnChunker chunker(store, DType::Parse("<i4"), {2}, 4, 8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&chunker, t] {
      for (int i = 0; i < 2000; ++i) {
        try {
          chunker.Append(Row(t, i), static_cast<uint64_t>(t), 4 * i + t);
        } catch (const InvalidArgumentError&) {
          // Another thread's later step came first: refused, as documented.
        }
        if (i % 7 == 0) chunker.Finalize();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  RESOUND_CHECK(chunker.num_kept() <= 8);
  chunker.Clear();
  RESOUND_CHECK(store->num_chunks() == 0 && store->memory_bytes() == 0);
}

}  // namespace
}  // namespace resound

int main() {
  resound::ChunksOfTheConfiguredLength();
  resound::KeepsChunksWhileARowIsInTheWindow();
  resound::RefusesBadConfigurations();
  resound::KeepsTheWindowOverALongRun();
  resound::ConcurrentAppends();
  std::puts("column_chunker_test: ok");
  return 0;
}

#include "resound/item.h"

#include <algorithm>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "resound/errors.h"
#include "resound/shape_text.h"

namespace resound {
namespace {

// Chunks of one column must hold the same element type. Strings may differ
// in width: each chunk is as wide as its longest string.
bool SameElementType(const DType& a, const DType& b) noexcept {
  if (a == b) return true;
  const std::string_view x = a.str();
  const std::string_view y = b.str();
  return x.size() >= 2 && y.size() >= 2 && x[1] == y[1] && (x[1] == 'S' || x[1] == 'U');
}

bool SameShape(const Chunk& a, const Chunk& b) noexcept {
  const auto x = a.step_shape();
  const auto y = b.step_shape();
  return std::equal(x.begin(), x.end(), y.begin(), y.end());
}

// Counts are stored in 32 bits; no real item comes anywhere near.
constexpr size_t kMaxCount = std::numeric_limits<uint32_t>::max();

}  // namespace

size_t Item::StorageBytes(size_t num_chunks, const Trajectory& trajectory) noexcept {
  size_t num_slices = 0;
  for (const TrajectoryColumn& column : trajectory) num_slices += column.slices.size();
  return num_chunks * sizeof(std::shared_ptr<const Chunk>) + trajectory.size() * sizeof(StoredColumn) +
         num_slices * sizeof(ChunkSlice);
}

Item::Item(Token, uint64_t key, const Trajectory& trajectory, std::span<std::shared_ptr<const Chunk>> chunks,
           const TrailingStorage& storage) noexcept
    : key_(key),
      storage_(storage.data),
      num_chunks_(static_cast<uint32_t>(chunks.size())),
      num_columns_(static_cast<uint32_t>(trajectory.size())) {
  // Each array starts the lifetime of its elements in the storage. Chunk
  // handles and slices are 8-byte aligned and columns 4-byte aligned; each
  // array's size is a multiple of 8 (columns are 8 bytes), so all pack.
  static_assert(alignof(std::shared_ptr<const Chunk>) == 8 && alignof(ChunkSlice) == 8 &&
                sizeof(StoredColumn) == 8 && alignof(StoredColumn) <= 8);
  std::uninitialized_move(chunks.begin(), chunks.end(), reinterpret_cast<std::shared_ptr<const Chunk>*>(storage_));
  auto* column_out = reinterpret_cast<StoredColumn*>(storage_ + num_chunks_ * sizeof(std::shared_ptr<const Chunk>));
  auto* slice_out = reinterpret_cast<ChunkSlice*>(storage_ + num_chunks_ * sizeof(std::shared_ptr<const Chunk>) +
                                                  num_columns_ * sizeof(StoredColumn));
  uint32_t slices_end = 0;
  for (const TrajectoryColumn& column : trajectory) {
    for (const ChunkSlice& slice : column.slices) {
      ::new (static_cast<void*>(slice_out + slices_end)) ChunkSlice(slice);
      ++slices_end;
    }
    ::new (static_cast<void*>(column_out++)) StoredColumn{slices_end, column.squeeze};
  }
}

Item::~Item() { std::destroy_n(chunk_array(), num_chunks_); }

std::shared_ptr<const Chunk>* Item::chunk_array() const noexcept {
  return std::launder(reinterpret_cast<std::shared_ptr<const Chunk>*>(storage_));
}

std::span<const std::shared_ptr<const Chunk>> Item::chunks() const noexcept { return {chunk_array(), num_chunks_}; }

const Item::StoredColumn* Item::columns() const noexcept {
  return std::launder(
      reinterpret_cast<const StoredColumn*>(storage_ + num_chunks_ * sizeof(std::shared_ptr<const Chunk>)));
}

const ChunkSlice* Item::slices() const noexcept {
  return std::launder(reinterpret_cast<const ChunkSlice*>(
      storage_ + num_chunks_ * sizeof(std::shared_ptr<const Chunk>) + num_columns_ * sizeof(StoredColumn)));
}

int64_t Item::column_length(size_t index) const noexcept {
  // Validated in Create: the sum of the slices' lengths, usually of one.
  int64_t length = 0;
  for (const ChunkSlice& slice : column(index).slices) length += slice.length;
  return length;
}

Item::ColumnView Item::column(size_t index) const noexcept {
  const StoredColumn* stored = columns();
  const uint32_t begin = index == 0 ? 0 : stored[index - 1].slices_end;
  return {{slices() + begin, stored[index].slices_end - begin}, stored[index].squeeze};
}

std::shared_ptr<const Item> Item::Create(uint64_t key, const Trajectory& trajectory, const ChunkStore& store) {
  // Messages are spelled only on error: this runs for every insert.
  const auto where = [key] { return "item " + std::to_string(key) + ": "; };
  if (trajectory.empty()) throw InvalidArgumentError(where() + "trajectory must have at least one column");
  std::vector<std::shared_ptr<const Chunk>> chunks;
  size_t num_slices = 0;
  for (size_t c = 0; c < trajectory.size(); ++c) {
    const TrajectoryColumn& column = trajectory[c];
    const auto col = [&where, c] { return where() + "column " + std::to_string(c) + ": "; };
    if (column.slices.empty()) throw InvalidArgumentError(col() + "must have at least one slice");
    num_slices += column.slices.size();
    const Chunk* first = nullptr;
    int64_t length = 0;
    for (const ChunkSlice& slice : column.slices) {
      // Items rarely reference more than a handful of chunks, so a linear scan
      // beats a hash set here.
      auto found = std::find_if(chunks.begin(), chunks.end(),
                                [&](const auto& chunk) { return chunk->key() == slice.chunk_key; });
      const Chunk* chunk;
      if (found != chunks.end()) {
        chunk = found->get();
      } else {
        auto resolved = store.Find(slice.chunk_key);
        if (!resolved) {
          throw NotFoundError(col() + "chunk " + std::to_string(slice.chunk_key) +
                              " is not in the chunk store");
        }
        chunk = resolved.get();
        chunks.push_back(std::move(resolved));
      }
      if (slice.length < 1 || slice.offset < 0 || slice.offset > chunk->num_steps() - slice.length) {
        throw InvalidArgumentError(col() + "slice (offset " + std::to_string(slice.offset) + ", length " +
                                   std::to_string(slice.length) + ") is outside chunk " +
                                   std::to_string(chunk->key()) + " of " +
                                   std::to_string(chunk->num_steps()) + " steps");
      }
      if (first == nullptr) {
        first = chunk;
      } else if (!SameElementType(chunk->dtype(), first->dtype()) || !SameShape(*chunk, *first)) {
        throw InvalidArgumentError(col() + "chunk " + std::to_string(chunk->key()) + " holds " +
                                   std::string(chunk->dtype().str()) + " " + ShapeText(chunk->step_shape()) +
                                   " but the column's first chunk holds " + std::string(first->dtype().str()) +
                                   " " + ShapeText(first->step_shape()));
      }
      length += slice.length;
    }
    if (column.squeeze && length != 1) {
      throw InvalidArgumentError(col() + "a squeezed column must have exactly one row, got " +
                                 std::to_string(length));
    }
  }
  if (trajectory.size() > kMaxCount || num_slices > kMaxCount) {
    throw InvalidArgumentError(where() + "has more than " + std::to_string(kMaxCount) + " columns or slices");
  }
  TrailingStorage storage{StorageBytes(chunks.size(), trajectory)};
  return AllocateSharedWithTrailing<Item>(storage, Token(), key, trajectory,
                                          std::span<std::shared_ptr<const Chunk>>(chunks));
}

}  // namespace resound

#include "resound/item.h"

#include <algorithm>
#include <span>
#include <string>
#include <string_view>

#include "resound/errors.h"

namespace resound {
namespace {

std::string ShapeString(std::span<const int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

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

}  // namespace

Item::Item(Token, uint64_t key, Trajectory trajectory, std::vector<std::shared_ptr<const Chunk>> chunks,
           std::vector<int64_t> column_lengths) noexcept
    : key_(key),
      trajectory_(std::move(trajectory)),
      chunks_(std::move(chunks)),
      column_lengths_(std::move(column_lengths)) {}

std::shared_ptr<const Item> Item::Create(uint64_t key, Trajectory trajectory, const ChunkStore& store) {
  // Messages are spelled only on error: this runs for every insert.
  const auto where = [key] { return "item " + std::to_string(key) + ": "; };
  if (trajectory.empty()) throw InvalidArgumentError(where() + "trajectory must have at least one column");
  std::vector<std::shared_ptr<const Chunk>> chunks;
  std::vector<int64_t> column_lengths;
  column_lengths.reserve(trajectory.size());
  for (size_t c = 0; c < trajectory.size(); ++c) {
    const TrajectoryColumn& column = trajectory[c];
    const auto col = [&where, c] { return where() + "column " + std::to_string(c) + ": "; };
    if (column.slices.empty()) throw InvalidArgumentError(col() + "must have at least one slice");
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
                                   std::string(chunk->dtype().str()) + " " + ShapeString(chunk->step_shape()) +
                                   " but the column's first chunk holds " + std::string(first->dtype().str()) +
                                   " " + ShapeString(first->step_shape()));
      }
      length += slice.length;
    }
    if (column.squeeze && length != 1) {
      throw InvalidArgumentError(col() + "a squeezed column must have exactly one row, got " +
                                 std::to_string(length));
    }
    column_lengths.push_back(length);
  }
  return std::make_shared<const Item>(Token(), key, std::move(trajectory), std::move(chunks),
                                     std::move(column_lengths));
}

}  // namespace resound

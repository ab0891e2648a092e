// The immutable part of a table item: its key, its trajectory and shared
// ownership of every chunk the trajectory slices. Items are built and
// validated before any table lock is taken, and the table keeps only a
// pointer plus the mutable fields (priority, times sampled), so building and
// freeing items never happens inside a table's critical section.
#ifndef RESOUND_ITEM_H_
#define RESOUND_ITEM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "resound/chunk.h"
#include "resound/chunk_store.h"
#include "resound/trajectory.h"

namespace resound {

class Item {
 public:
  // Resolves every chunk key through `store` and validates the trajectory:
  // at least one column, every column at least one slice, slices inside their
  // chunk, the chunks of a column agreeing on dtype and step shape, squeezed
  // columns exactly one row long. Throws InvalidArgumentError (bad shape of
  // the request) or NotFoundError (unknown chunk key).
  static std::shared_ptr<const Item> Create(uint64_t key, Trajectory trajectory,
                                            const ChunkStore& store);

  // Only Create() can make the token, so only validated items exist; the
  // constructor is public so that make_shared can allocate item and control
  // block together.
  class Token {
    friend class Item;
    explicit Token() = default;
  };
  Item(Token, uint64_t key, Trajectory trajectory, std::vector<std::shared_ptr<const Chunk>> chunks,
       std::vector<int64_t> column_lengths) noexcept;

  Item(const Item&) = delete;
  Item& operator=(const Item&) = delete;

  uint64_t key() const noexcept { return key_; }
  const Trajectory& trajectory() const noexcept { return trajectory_; }
  // Distinct chunks in order of first reference.
  const std::vector<std::shared_ptr<const Chunk>>& chunks() const noexcept { return chunks_; }
  // Number of rows in column `index` (after concatenating its slices).
  int64_t column_length(size_t index) const noexcept { return column_lengths_[index]; }

 private:
  const uint64_t key_;
  const Trajectory trajectory_;
  const std::vector<std::shared_ptr<const Chunk>> chunks_;
  const std::vector<int64_t> column_lengths_;
};

}  // namespace resound

#endif  // RESOUND_ITEM_H_

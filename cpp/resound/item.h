// The immutable part of a table item: its key, its trajectory and shared
// ownership of every chunk the trajectory slices. Items are built and
// validated before any table lock is taken, and the table keeps only a
// pointer plus the mutable fields (priority, times sampled), so building and
// freeing items never happens inside a table's critical section.
//
// A table holds one item per entry, so the layout is compact: the item, its
// control block, its chunk handles, its columns and its slices share a single
// allocation (see TrailingAllocator), read in place through views.
#ifndef RESOUND_ITEM_H_
#define RESOUND_ITEM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "resound/chunk.h"
#include "resound/chunk_store.h"
#include "resound/trailing_allocator.h"
#include "resound/trajectory.h"

namespace resound {

class Item {
 public:
  // One column read in place: its slices in order, and whether it is
  // squeezed (see TrajectoryColumn).
  struct ColumnView {
    std::span<const ChunkSlice> slices;
    bool squeeze = false;
  };

  // The trajectory read in place, indexable like a Trajectory:
  // trajectory().size(), trajectory()[c].slices, trajectory()[c].squeeze.
  class TrajectoryView {
   public:
    explicit TrajectoryView(const Item& item) noexcept : item_(&item) {}
    size_t size() const noexcept { return item_->num_columns_; }
    bool empty() const noexcept { return size() == 0; }
    ColumnView operator[](size_t index) const noexcept { return item_->column(index); }

   private:
    const Item* item_;
  };

  // Resolves every chunk key through `store` and validates the trajectory:
  // at least one column, every column at least one slice, slices inside their
  // chunk, the chunks of a column agreeing on dtype and step shape, squeezed
  // columns exactly one row long. Throws InvalidArgumentError (bad shape of
  // the request) or NotFoundError (unknown chunk key).
  static std::shared_ptr<const Item> Create(uint64_t key, const Trajectory& trajectory, const ChunkStore& store);

  // Only Create() can make the token, so only validated items exist; the
  // constructor is public so that allocate_shared can allocate item and
  // control block together. It moves `chunks` and copies `trajectory` into
  // `storage.data`, sized by StorageBytes() (see AllocateSharedWithTrailing).
  class Token {
    friend class Item;
    explicit Token() = default;
  };
  Item(Token, uint64_t key, const Trajectory& trajectory, std::span<std::shared_ptr<const Chunk>> chunks,
       const TrailingStorage& storage) noexcept;
  ~Item();

  Item(const Item&) = delete;
  Item& operator=(const Item&) = delete;

  uint64_t key() const noexcept { return key_; }
  TrajectoryView trajectory() const noexcept { return TrajectoryView(*this); }
  size_t num_columns() const noexcept { return num_columns_; }
  ColumnView column(size_t index) const noexcept;
  // Distinct chunks in order of first reference.
  std::span<const std::shared_ptr<const Chunk>> chunks() const noexcept;
  // Number of rows in column `index` (after concatenating its slices).
  int64_t column_length(size_t index) const noexcept;

 private:
  // A column as stored: its slices are slices()[previous column's
  // slices_end, slices_end).
  struct StoredColumn {
    uint32_t slices_end;
    bool squeeze;
  };

  static size_t StorageBytes(size_t num_chunks, const Trajectory& trajectory) noexcept;
  std::shared_ptr<const Chunk>* chunk_array() const noexcept;
  const StoredColumn* columns() const noexcept;
  const ChunkSlice* slices() const noexcept;

  const uint64_t key_;
  // Chunk handles, then columns, then slices; freed with the control block.
  std::byte* const storage_;
  const uint32_t num_chunks_;
  const uint32_t num_columns_;
};

}  // namespace resound

#endif  // RESOUND_ITEM_H_

// Many items' trajectories as six flat arrays: how the gRPC service carries
// them. A message of a thousand items then costs a few array copies to encode
// and decode instead of a thousand nested messages, each of which would cost
// Python object work on both ends.
//
// The arrays, in item order:
//   num_columns[item]    columns of each item;
//   num_slices[column]   slices of each column (the items' columns in order);
//   squeeze[column]      whether the column is squeezed (see TrajectoryColumn);
//   chunk_keys, offsets, lengths [slice]  the slices (the columns' in order).
#ifndef RESOUND_PACKED_TRAJECTORIES_H_
#define RESOUND_PACKED_TRAJECTORIES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "resound/item.h"
#include "resound/trajectory.h"

namespace resound {

class PackedTrajectories {
 public:
  PackedTrajectories() = default;
  // Takes decoded arrays; throws InvalidArgumentError unless they describe
  // exactly num_columns.size() trajectories.
  PackedTrajectories(std::vector<uint32_t> num_columns, std::vector<uint32_t> num_slices,
                     std::vector<uint8_t> squeeze, std::vector<uint64_t> chunk_keys,
                     std::vector<int64_t> offsets, std::vector<int64_t> lengths);

  void Append(const Trajectory& trajectory);
  void Append(Item::TrajectoryView trajectory);
  // Room for `items` more items of `slices` slices (one column each) in
  // all, so that appending a message's items allocates once per array.
  void Reserve(size_t items, size_t slices);

  size_t size() const noexcept { return num_columns_.size(); }
  // The trajectory of item `index` (< size()).
  Trajectory Get(size_t index) const;

  const std::vector<uint32_t>& num_columns() const noexcept { return num_columns_; }
  const std::vector<uint32_t>& num_slices() const noexcept { return num_slices_; }
  const std::vector<uint8_t>& squeeze() const noexcept { return squeeze_; }
  const std::vector<uint64_t>& chunk_keys() const noexcept { return chunk_keys_; }
  const std::vector<int64_t>& offsets() const noexcept { return offsets_; }
  const std::vector<int64_t>& lengths() const noexcept { return lengths_; }

 private:
  void AppendColumn(const ChunkSlice* slices, size_t count, bool squeeze);

  std::vector<uint32_t> num_columns_;
  std::vector<uint32_t> num_slices_;
  std::vector<uint8_t> squeeze_;
  std::vector<uint64_t> chunk_keys_;
  std::vector<int64_t> offsets_;
  std::vector<int64_t> lengths_;
  // Where each item's columns and each column's slices start: random access
  // without summing the counts again.
  std::vector<size_t> first_column_;
  std::vector<size_t> first_slice_;
};

}  // namespace resound

#endif  // RESOUND_PACKED_TRAJECTORIES_H_

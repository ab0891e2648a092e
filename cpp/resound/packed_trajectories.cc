#include "resound/packed_trajectories.h"

#include <string>
#include <utility>

#include "resound/errors.h"

namespace resound {

PackedTrajectories::PackedTrajectories(std::vector<uint32_t> num_columns, std::vector<uint32_t> num_slices,
                                       std::vector<uint8_t> squeeze, std::vector<uint64_t> chunk_keys,
                                       std::vector<int64_t> offsets, std::vector<int64_t> lengths)
    : num_columns_(std::move(num_columns)),
      num_slices_(std::move(num_slices)),
      squeeze_(std::move(squeeze)),
      chunk_keys_(std::move(chunk_keys)),
      offsets_(std::move(offsets)),
      lengths_(std::move(lengths)) {
  // Sums in 64 bits: 32-bit counts cannot overflow them.
  uint64_t columns = 0;
  first_column_.reserve(num_columns_.size());
  for (const uint32_t count : num_columns_) {
    first_column_.push_back(static_cast<size_t>(columns));
    columns += count;
  }
  if (columns != num_slices_.size() || columns != squeeze_.size()) {
    throw InvalidArgumentError("trajectories: num_columns adds up to " + std::to_string(columns) +
                               " columns, but num_slices has " + std::to_string(num_slices_.size()) +
                               " and squeeze " + std::to_string(squeeze_.size()) + " entries");
  }
  uint64_t slices = 0;
  first_slice_.reserve(num_slices_.size());
  for (const uint32_t count : num_slices_) {
    first_slice_.push_back(static_cast<size_t>(slices));
    slices += count;
  }
  if (slices != chunk_keys_.size() || slices != offsets_.size() || slices != lengths_.size()) {
    throw InvalidArgumentError("trajectories: num_slices adds up to " + std::to_string(slices) +
                               " slices, but chunk_keys, offsets and lengths have " +
                               std::to_string(chunk_keys_.size()) + ", " + std::to_string(offsets_.size()) +
                               " and " + std::to_string(lengths_.size()) + " entries");
  }
}

void PackedTrajectories::Reserve(size_t items, size_t slices) {
  num_columns_.reserve(num_columns_.size() + items);
  first_column_.reserve(first_column_.size() + items);
  num_slices_.reserve(num_slices_.size() + items);
  squeeze_.reserve(squeeze_.size() + items);
  first_slice_.reserve(first_slice_.size() + items);
  chunk_keys_.reserve(chunk_keys_.size() + slices);
  offsets_.reserve(offsets_.size() + slices);
  lengths_.reserve(lengths_.size() + slices);
}

void PackedTrajectories::AppendColumn(const ChunkSlice* slices, size_t count, bool squeeze) {
  first_slice_.push_back(chunk_keys_.size());
  num_slices_.push_back(static_cast<uint32_t>(count));
  squeeze_.push_back(squeeze ? 1 : 0);
  for (size_t s = 0; s < count; ++s) {
    chunk_keys_.push_back(slices[s].chunk_key);
    offsets_.push_back(slices[s].offset);
    lengths_.push_back(slices[s].length);
  }
}

void PackedTrajectories::Append(const Trajectory& trajectory) {
  first_column_.push_back(num_slices_.size());
  num_columns_.push_back(static_cast<uint32_t>(trajectory.size()));
  for (const TrajectoryColumn& column : trajectory) {
    AppendColumn(column.slices.data(), column.slices.size(), column.squeeze);
  }
}

void PackedTrajectories::Append(Item::TrajectoryView trajectory) {
  first_column_.push_back(num_slices_.size());
  num_columns_.push_back(static_cast<uint32_t>(trajectory.size()));
  for (size_t c = 0; c < trajectory.size(); ++c) {
    const Item::ColumnView column = trajectory[c];
    AppendColumn(column.slices.data(), column.slices.size(), column.squeeze);
  }
}

Trajectory PackedTrajectories::Get(size_t index) const {
  Trajectory trajectory(num_columns_[index]);
  size_t column = first_column_[index];
  for (TrajectoryColumn& out : trajectory) {
    out.squeeze = squeeze_[column] != 0;
    const size_t first = first_slice_[column];
    out.slices.reserve(num_slices_[column]);
    for (size_t s = first; s < first + num_slices_[column]; ++s) {
      out.slices.push_back({chunk_keys_[s], offsets_[s], lengths_[s]});
    }
    ++column;
  }
  return trajectory;
}

}  // namespace resound

// How an item points at its data: columns, each a list of row ranges of
// chunks. Plain values, validated when an Item is built from them.
#ifndef RESOUND_TRAJECTORY_H_
#define RESOUND_TRAJECTORY_H_

#include <cstdint>
#include <vector>

namespace resound {

// Rows [offset, offset + length) of the chunk with `chunk_key`.
struct ChunkSlice {
  uint64_t chunk_key = 0;
  int64_t offset = 0;
  int64_t length = 0;
  friend bool operator==(const ChunkSlice&, const ChunkSlice&) = default;
};

// One column of a trajectory: the rows of its slices, concatenated in order.
// `squeeze` marks a column of exactly one row that is returned without its
// leading time axis.
struct TrajectoryColumn {
  std::vector<ChunkSlice> slices;
  bool squeeze = false;
  friend bool operator==(const TrajectoryColumn&, const TrajectoryColumn&) = default;
};

using Trajectory = std::vector<TrajectoryColumn>;

}  // namespace resound

#endif  // RESOUND_TRAJECTORY_H_

// A tree over an array of non-negative weights in which every inner node
// holds the sum of its children, so a weighted draw and a weight change both
// cost O(log n).
//
// Layout: each node has kFanout children whose sums sit next to each other in
// one cache line, and levels are stored one after another. A descent reads
// one cache line per level, and with a fan-out of 8 a million leaves need only
// 7 levels, most of them hot in cache; a binary tree would touch ~20 lines.
//
// Only the nodes that can be non-zero are stored: each level holds enough
// whole groups of kFanout to cover the leaves in use, so memory follows
// size() rather than the power of kFanout above it (which can be 8x more).
//
// Each inner node is recomputed from its children on every change (never
// adjusted by a delta), so rounding errors cannot accumulate over millions of
// updates: a sum is always exactly what adding its children gives, and the
// tree never needs a rebuild to correct drift.
#ifndef RESOUND_SELECTORS_SUM_TREE_H_
#define RESOUND_SELECTORS_SUM_TREE_H_

#include <cstddef>
#include <vector>

#include "resound/page_allocator.h"

namespace resound {

class SumTree {
 public:
  static constexpr size_t kFanout = 8;

  SumTree();

  size_t size() const noexcept { return size_; }
  // Number of leaves the tree has room for before it grows (a power of kFanout).
  size_t capacity() const noexcept;
  // Grows or shrinks to `size` leaves; new leaves weigh 0.
  void Resize(size_t size);
  // Sets leaf `index` (< size) to `weight`, which must be finite and >= 0
  // (InvalidArgumentError otherwise, also for an index out of range).
  void Set(size_t index, double weight);
  double Get(size_t index) const;
  double Total() const noexcept { return levels_.front().front(); }
  // The leaf whose cumulative range [prefix, prefix + weight) contains
  // `target`, skipping zero-weight leaves; a target at or beyond the total
  // lands on the last leaf with weight. Requires Total() > 0
  // (FailedPreconditionError otherwise).
  size_t Find(double target) const;
  // Find() for many targets at once: descends a group of targets level by
  // level, prefetching each target's next cache line, so the cache misses of
  // different targets overlap instead of queueing one after another.
  void FindMany(const double* targets, size_t count, size_t* leaves) const;
  void Clear() noexcept;

 private:
  void SetLeaf(size_t index, double weight) noexcept;
  // One step of a descent: the child of `node` (at `level` - 1) that holds
  // `target`, with `target` reduced by the sums of the children before it.
  size_t Step(size_t level, size_t node, double& target) const noexcept;
  double* Level(size_t level) noexcept { return levels_[level].data(); }
  const double* Level(size_t level) const noexcept { return levels_[level].data(); }

  size_t size_ = 0;  // leaves in use; leaves beyond weigh 0
  // Level 0 is the root (one node); the last level holds the leaves. Below
  // the root, level k stores a multiple of kFanout nodes covering every node
  // whose parent may be non-zero, so a descent can always read all kFanout
  // children of a node. Levels never shrink (except in Clear()): nodes past
  // the leaves in use are kept at 0.
  std::vector<PageVector<double>> levels_;
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_SUM_TREE_H_

// A tree over an array of non-negative weights in which every inner node
// holds the sum of its children, so a weighted draw and a weight change both
// cost O(log n).
//
// Layout: each node has kFanout children whose sums sit next to each other in
// one cache line, and levels are stored one after another. A descent reads
// one cache line per level, and with a fan-out of 8 a million leaves need only
// 7 levels, most of them hot in cache; a binary tree would touch ~20 lines.
//
// Each inner node is recomputed from its children on every change (never
// adjusted by a delta), so rounding errors cannot accumulate over millions of
// updates: a sum is always exactly what adding its children gives, and the
// tree never needs a rebuild to correct drift.
#ifndef RESOUND_SELECTORS_SUM_TREE_H_
#define RESOUND_SELECTORS_SUM_TREE_H_

#include <cstddef>
#include <vector>

namespace resound {

class SumTree {
 public:
  static constexpr size_t kFanout = 8;

  SumTree();

  size_t size() const noexcept { return size_; }
  // Number of leaves the tree has room for before it grows (a power of kFanout).
  size_t capacity() const noexcept { return level_size_.back(); }
  // Grows or shrinks to `size` leaves; new leaves weigh 0.
  void Resize(size_t size);
  // Sets leaf `index` (< size) to `weight`, which must be finite and >= 0
  // (InvalidArgumentError otherwise, also for an index out of range).
  void Set(size_t index, double weight);
  double Get(size_t index) const;
  double Total() const noexcept { return nodes_[0]; }
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
  void Build(size_t levels, const std::vector<double>& leaves);
  void SetLeaf(size_t index, double weight) noexcept;
  // One step of a descent: the child of `node` (at `level` - 1) that holds
  // `target`, with `target` reduced by the sums of the children before it.
  size_t Step(size_t level, size_t node, double& target) const noexcept;
  double* Level(size_t level) noexcept { return nodes_.data() + level_offset_[level]; }
  const double* Level(size_t level) const noexcept { return nodes_.data() + level_offset_[level]; }

  size_t size_ = 0;  // leaves in use; leaves beyond weigh 0
  // Level 0 is the root; the last level holds the leaves.
  std::vector<size_t> level_offset_;
  std::vector<size_t> level_size_;
  std::vector<double> nodes_;
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_SUM_TREE_H_

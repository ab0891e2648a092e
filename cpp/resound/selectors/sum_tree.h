// A binary tree over an array of non-negative weights in which every inner
// node holds the sum of its two children, so a weighted draw and a weight
// change both cost O(log n).
//
// Each inner node is recomputed as left + right from its children on every
// change (not adjusted by a delta), so rounding errors cannot accumulate over
// millions of updates: a sum is always exactly what adding its children
// gives, and the tree never needs a rebuild to correct drift.
#ifndef RESOUND_SELECTORS_SUM_TREE_H_
#define RESOUND_SELECTORS_SUM_TREE_H_

#include <cstddef>
#include <vector>

namespace resound {

class SumTree {
 public:
  SumTree() : nodes_(2, 0.0) {}

  size_t size() const noexcept { return size_; }
  size_t capacity() const noexcept { return capacity_; }
  // Grows or shrinks to `size` leaves; new leaves weigh 0.
  void Resize(size_t size);
  // Sets leaf `index` (< size) to `weight`, which must be finite and >= 0
  // (InvalidArgumentError otherwise; OutOfRange -> InvalidArgumentError).
  void Set(size_t index, double weight);
  double Get(size_t index) const;
  double Total() const noexcept { return nodes_[1]; }
  // The leaf whose cumulative range [prefix, prefix + weight) contains
  // `target`, skipping zero-weight leaves; a target at or beyond the total
  // lands on the last leaf with weight. Requires Total() > 0
  // (FailedPreconditionError otherwise).
  size_t Find(double target) const;
  void Clear() noexcept;

 private:
  void Grow(size_t min_capacity);
  void SetLeaf(size_t index, double weight) noexcept;

  size_t capacity_ = 1;      // number of leaves the array has room for (power of 2)
  size_t size_ = 0;          // leaves in use; leaves beyond weigh 0
  std::vector<double> nodes_;  // 1-based heap layout; leaves at [capacity_, 2 * capacity_)
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_SUM_TREE_H_

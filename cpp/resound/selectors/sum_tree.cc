#include "resound/selectors/sum_tree.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "resound/errors.h"

namespace resound {

SumTree::SumTree() : levels_(1, PageVector<double>(1, 0.0)) {}

size_t SumTree::capacity() const noexcept {
  size_t room = 1;
  for (size_t level = 1; level < levels_.size(); ++level) room *= kFanout;
  return room;
}

void SumTree::Resize(size_t size) {
  while (size > capacity()) {
    // A new root above the old one, which becomes the first of its children;
    // every node keeps its index, so nothing below needs to move.
    const double total = Total();
    levels_.front().resize(kFanout, 0.0);
    levels_.insert(levels_.begin(), PageVector<double>(1, total));
  }
  for (size_t i = size; i < size_; ++i) SetLeaf(i, 0.0);
  // Cover the leaves in use, and at each level above the nodes over them.
  size_t needed = size;
  for (size_t level = levels_.size() - 1; level > 0; --level) {
    const size_t groups = (needed + kFanout - 1) / kFanout;
    if (levels_[level].size() < groups * kFanout) levels_[level].resize(groups * kFanout, 0.0);
    needed = groups;
  }
  size_ = size;
}

void SumTree::SetLeaf(size_t index, double weight) noexcept {
  size_t level = levels_.size() - 1;
  Level(level)[index] = weight;
  while (level > 0) {
    const size_t parent = index / kFanout;
    const double* children = Level(level) + parent * kFanout;
    double sum = 0;
    for (size_t c = 0; c < kFanout; ++c) sum += children[c];
    --level;
    Level(level)[parent] = sum;
    index = parent;
  }
}

void SumTree::Set(size_t index, double weight) {
  if (index >= size_) {
    throw InvalidArgumentError("index " + std::to_string(index) + " is outside the tree of size " +
                               std::to_string(size_));
  }
  if (!std::isfinite(weight) || weight < 0) {
    throw InvalidArgumentError("weight must be finite and >= 0, got " + std::to_string(weight));
  }
  SetLeaf(index, weight);
}

double SumTree::Get(size_t index) const {
  if (index >= size_) {
    throw InvalidArgumentError("index " + std::to_string(index) + " is outside the tree of size " +
                               std::to_string(size_));
  }
  return Level(levels_.size() - 1)[index];
}

size_t SumTree::Step(size_t level, size_t node, double& target) const noexcept {
  const double* children = Level(level) + node * kFanout;
  // Take the first child whose range holds the target; never a child of
  // weight 0. A parent with a positive sum always has a positive child, so a
  // target at or past the total (or pushed there by rounding) takes the last
  // positive child, and the target becomes infinite so that every level below
  // also takes its last positive child.
  size_t last_positive = 0;
  for (size_t c = 0; c < kFanout; ++c) {
    const double sum = children[c];
    if (sum <= 0) continue;
    if (target < sum) return node * kFanout + c;
    last_positive = c;
    target -= sum;
  }
  target = std::numeric_limits<double>::infinity();
  return node * kFanout + last_positive;
}

size_t SumTree::Find(double target) const {
  if (!(Total() > 0)) throw FailedPreconditionError("cannot search a sum tree whose total is 0");
  size_t node = 0;
  for (size_t level = 1; level < levels_.size(); ++level) node = Step(level, node, target);
  return node;
}

void SumTree::FindMany(const double* targets, size_t count, size_t* leaves) const {
  if (!(Total() > 0)) throw FailedPreconditionError("cannot search a sum tree whose total is 0");
  constexpr size_t kGroup = 16;
  const size_t levels = levels_.size();
  for (size_t start = 0; start < count; start += kGroup) {
    const size_t n = std::min(kGroup, count - start);
    double remaining[kGroup];
    size_t node[kGroup];
    for (size_t i = 0; i < n; ++i) {
      remaining[i] = targets[start + i];
      node[i] = 0;
    }
    for (size_t level = 1; level < levels; ++level) {
      for (size_t i = 0; i < n; ++i) {
        node[i] = Step(level, node[i], remaining[i]);
        if (level + 1 < levels) __builtin_prefetch(Level(level + 1) + node[i] * kFanout);
      }
    }
    for (size_t i = 0; i < n; ++i) leaves[start + i] = node[i];
  }
}

void SumTree::Clear() noexcept {
  size_ = 0;
  // The root's vector has room for its node, so this does not allocate.
  levels_.resize(1);
  levels_.front().assign(1, 0.0);
}

}  // namespace resound

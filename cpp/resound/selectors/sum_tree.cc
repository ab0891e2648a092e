#include "resound/selectors/sum_tree.h"

#include <cmath>
#include <string>

#include "resound/errors.h"

namespace resound {

void SumTree::Grow(size_t min_capacity) {
  size_t capacity = capacity_;
  while (capacity < min_capacity) capacity *= 2;
  if (capacity == capacity_) return;
  std::vector<double> nodes(2 * capacity, 0.0);
  for (size_t i = 0; i < size_; ++i) nodes[capacity + i] = nodes_[capacity_ + i];
  for (size_t node = capacity - 1; node >= 1; --node) nodes[node] = nodes[2 * node] + nodes[2 * node + 1];
  nodes_ = std::move(nodes);
  capacity_ = capacity;
}

void SumTree::Resize(size_t size) {
  if (size > capacity_) Grow(size);
  for (size_t i = size; i < size_; ++i) SetLeaf(i, 0.0);
  size_ = size;
}

void SumTree::SetLeaf(size_t index, double weight) noexcept {
  size_t node = capacity_ + index;
  nodes_[node] = weight;
  for (node /= 2; node >= 1; node /= 2) nodes_[node] = nodes_[2 * node] + nodes_[2 * node + 1];
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
  return nodes_[capacity_ + index];
}

size_t SumTree::Find(double target) const {
  if (!(Total() > 0)) throw FailedPreconditionError("cannot search a sum tree whose total is 0");
  size_t node = 1;
  while (node < capacity_) {
    const size_t left = 2 * node;
    const double left_sum = nodes_[left];
    const double right_sum = nodes_[left + 1];
    // Never step into a subtree of weight 0: with a positive parent at least
    // one child is positive, so the walk always ends on a leaf with weight.
    if (right_sum <= 0 || (target < left_sum && left_sum > 0)) {
      node = left;
    } else {
      target -= left_sum;
      node = left + 1;
    }
  }
  return node - capacity_;
}

void SumTree::Clear() noexcept {
  capacity_ = 1;
  size_ = 0;
  nodes_.assign(2, 0.0);
}

}  // namespace resound

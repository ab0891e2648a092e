#include "resound/selectors/prioritized_selector.h"

#include <cmath>
#include <sstream>

#include "resound/errors.h"
#include "resound/selectors/random_seed.h"

namespace resound {

PrioritizedSelector::PrioritizedSelector(double priority_exponent, std::optional<uint64_t> seed)
    : exponent_(priority_exponent), seed_(seed), rng_(SeedOrRandom(seed)) {
  if (!std::isfinite(priority_exponent) || priority_exponent < 0) {
    std::ostringstream message;
    message << "priority_exponent must be a finite number >= 0, got " << priority_exponent;
    throw InvalidArgumentError(message.str());
  }
}

double PrioritizedSelector::Weight(double priority) const noexcept {
  return priority == 0 ? 0.0 : std::pow(priority, exponent_);
}

void PrioritizedSelector::ValidatePriority(double priority) const {
  // This runs for every insert and update: the message stream is built only
  // on error (constructing one costs more than the whole update).
  if (!std::isfinite(priority) || priority < 0) {
    std::ostringstream message;
    message << "priority must be a finite number >= 0 for a prioritized selector, got " << priority;
    throw InvalidArgumentError(message.str());
  }
  if (!std::isfinite(Weight(priority))) {
    std::ostringstream message;
    message << "priority " << priority << " raised to priority_exponent " << exponent_
            << " overflows a double";
    throw InvalidArgumentError(message.str());
  }
}

size_t PrioritizedSelector::IndexOf(uint64_t key) const {
  const size_t* index = index_.Find(key);
  if (index == nullptr) throw NotFoundError("key " + std::to_string(key) + " is not in the selector");
  return *index;
}

void PrioritizedSelector::Insert(uint64_t key, double priority) {
  ValidatePriority(priority);
  if (Contains(key)) throw InvalidArgumentError("key " + std::to_string(key) + " is already in the selector");
  const size_t index = keys_.size();
  keys_.push_back(key);
  index_.TryEmplace(key, index);
  tree_.Resize(index + 1);
  tree_.Set(index, Weight(priority));
}

void PrioritizedSelector::Update(uint64_t key, double priority) {
  ValidatePriority(priority);
  tree_.Set(IndexOf(key), Weight(priority));
}

void PrioritizedSelector::Delete(uint64_t key) {
  const size_t hole = IndexOf(key);
  const size_t last = keys_.size() - 1;
  if (hole != last) {
    const uint64_t moved = keys_[last];
    keys_[hole] = moved;
    *index_.Find(moved) = hole;
    tree_.Set(hole, tree_.Get(last));
  }
  keys_.pop_back();
  index_.Erase(key);
  tree_.Resize(last);
}

Selection PrioritizedSelector::Sample() {
  const size_t n = keys_.size();
  if (n == 0) throw FailedPreconditionError("cannot sample from an empty selector");
  const double total = tree_.Total();
  if (!(total > 0)) {
    std::uniform_int_distribution<size_t> pick(0, n - 1);
    return {keys_[pick(rng_)], 1.0 / static_cast<double>(n)};
  }
  std::uniform_real_distribution<double> draw(0.0, total);
  const size_t index = tree_.Find(draw(rng_));
  return {keys_[index], tree_.Get(index) / total};
}

void PrioritizedSelector::SampleMany(size_t count, Selection* out) {
  const double total = tree_.Total();
  if (keys_.empty() || !(total > 0)) {
    ItemSelector::SampleMany(count, out);  // empty (throws) or uniform fallback
    return;
  }
  targets_.resize(count);
  leaves_.resize(count);
  std::uniform_real_distribution<double> draw(0.0, total);
  for (double& target : targets_) target = draw(rng_);
  tree_.FindMany(targets_.data(), count, leaves_.data());
  for (const size_t leaf : leaves_) __builtin_prefetch(&keys_[leaf]);
  for (size_t i = 0; i < count; ++i) out[i] = {keys_[leaves_[i]], tree_.Get(leaves_[i]) / total};
}

double PrioritizedSelector::Probability(uint64_t key) const {
  const size_t index = IndexOf(key);
  const double total = tree_.Total();
  if (!(total > 0)) return 1.0 / static_cast<double>(keys_.size());
  return tree_.Get(index) / total;
}

void PrioritizedSelector::Clear() noexcept {
  keys_.clear();
  index_.Clear();
  tree_.Clear();
}

SelectorOptions PrioritizedSelector::options() const {
  return {SelectorKind::kPrioritized, exponent_, seed_};
}

}  // namespace resound

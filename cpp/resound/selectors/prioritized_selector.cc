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

void PrioritizedSelector::Append(double priority) {
  const size_t slot = tree_.size();
  CheckRoom(slot);
  tree_.Resize(slot + 1);
  tree_.Set(slot, Weight(priority));
}

void PrioritizedSelector::Update(size_t slot, double priority) { tree_.Set(slot, Weight(priority)); }

void PrioritizedSelector::Remove(size_t slot) {
  const size_t last = tree_.size() - 1;
  if (slot != last) tree_.Set(slot, tree_.Get(last));
  tree_.Resize(last);
}

SlotSelection PrioritizedSelector::Sample() {
  const size_t n = tree_.size();
  if (n == 0) ThrowEmpty();
  const double total = tree_.Total();
  if (!(total > 0)) {
    std::uniform_int_distribution<size_t> pick(0, n - 1);
    return {pick(rng_), 1.0 / static_cast<double>(n)};
  }
  std::uniform_real_distribution<double> draw(0.0, total);
  const size_t slot = tree_.Find(draw(rng_));
  return {slot, tree_.Get(slot) / total};
}

void PrioritizedSelector::SampleMany(size_t count, SlotSelection* out) {
  const double total = tree_.Total();
  if (tree_.size() == 0 || !(total > 0)) {
    SlotSelector::SampleMany(count, out);  // empty (throws) or uniform fallback
    return;
  }
  targets_.resize(count);
  leaves_.resize(count);
  std::uniform_real_distribution<double> draw(0.0, total);
  for (double& target : targets_) target = draw(rng_);
  tree_.FindMany(targets_.data(), count, leaves_.data());
  for (size_t i = 0; i < count; ++i) out[i] = {leaves_[i], tree_.Get(leaves_[i]) / total};
}

double PrioritizedSelector::Probability(size_t slot) const {
  const double total = tree_.Total();
  if (!(total > 0)) return 1.0 / static_cast<double>(tree_.size());
  return tree_.Get(slot) / total;
}

SelectorOptions PrioritizedSelector::options() const {
  return {SelectorKind::kPrioritized, exponent_, seed_};
}

}  // namespace resound

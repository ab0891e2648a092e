#include "resound/selectors/uniform_selector.h"

#include "resound/selectors/random_seed.h"

namespace resound {

UniformSelector::UniformSelector(std::optional<uint64_t> seed) : seed_(seed), rng_(SeedOrRandom(seed)) {}

void UniformSelector::Append(double) {
  CheckRoom(size_);
  ++size_;
}

void UniformSelector::Update(size_t, double) {}

void UniformSelector::Remove(size_t) { --size_; }

SlotSelection UniformSelector::Sample() {
  if (size_ == 0) ThrowEmpty();
  std::uniform_int_distribution<size_t> pick(0, size_ - 1);
  return {pick(rng_), 1.0 / static_cast<double>(size_)};
}

void UniformSelector::SampleMany(size_t count, SlotSelection* out) {
  if (count == 0) return;
  if (size_ == 0) ThrowEmpty();
  // One distribution for the batch draws the same numbers as one per call.
  std::uniform_int_distribution<size_t> pick(0, size_ - 1);
  const double probability = 1.0 / static_cast<double>(size_);
  for (size_t i = 0; i < count; ++i) out[i] = {pick(rng_), probability};
}

double UniformSelector::Probability(size_t) const { return 1.0 / static_cast<double>(size_); }

SelectorOptions UniformSelector::options() const {
  return {SelectorKind::kUniform, 0.0, seed_};
}

}  // namespace resound

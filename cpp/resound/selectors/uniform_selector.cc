#include "resound/selectors/uniform_selector.h"

#include <string>

#include "resound/errors.h"
#include "resound/selectors/random_seed.h"

namespace resound {

UniformSelector::UniformSelector(std::optional<uint64_t> seed) : seed_(seed), rng_(SeedOrRandom(seed)) {}

void UniformSelector::Insert(uint64_t key, double priority) {
  ValidatePriority(priority);
  if (!index_.TryEmplace(key, keys_.size()).second) throw InvalidArgumentError("key " + std::to_string(key) + " is already in the selector");
  keys_.push_back(key);
}

void UniformSelector::Update(uint64_t key, double priority) {
  ValidatePriority(priority);
  if (!Contains(key)) throw NotFoundError("key " + std::to_string(key) + " is not in the selector");
}

void UniformSelector::Delete(uint64_t key) {
  const size_t* position = index_.Find(key);
  if (position == nullptr) throw NotFoundError("key " + std::to_string(key) + " is not in the selector");
  const size_t hole = *position;
  index_.Erase(key);
  const uint64_t last = keys_.back();
  keys_.pop_back();
  if (hole < keys_.size()) {
    keys_[hole] = last;
    *index_.Find(last) = hole;
  }
}

Selection UniformSelector::Sample() {
  if (keys_.empty()) throw FailedPreconditionError("cannot sample from an empty selector");
  std::uniform_int_distribution<size_t> pick(0, keys_.size() - 1);
  return {keys_[pick(rng_)], 1.0 / static_cast<double>(keys_.size())};
}

void UniformSelector::Clear() noexcept {
  keys_.clear();
  index_.Clear();
}

SelectorOptions UniformSelector::options() const {
  return {SelectorKind::kUniform, 0.0, seed_};
}

}  // namespace resound

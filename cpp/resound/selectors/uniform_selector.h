// Chooses every item with the same probability, 1/n, in O(1). Items live in
// the owner's dense slots, so a uniform draw is just a random slot: the
// selector keeps no state per item at all.
#ifndef RESOUND_SELECTORS_UNIFORM_SELECTOR_H_
#define RESOUND_SELECTORS_UNIFORM_SELECTOR_H_

#include <optional>
#include <random>

#include "resound/selectors/slot_selector.h"

namespace resound {

class UniformSelector final : public SlotSelector {
 public:
  explicit UniformSelector(std::optional<uint64_t> seed = std::nullopt);

  void Append(double priority) override;
  void Update(size_t slot, double priority) override;
  void Remove(size_t slot) override;
  SlotSelection Sample() override;
  void SampleMany(size_t count, SlotSelection* out) override;
  double Probability(size_t slot) const override;
  void Clear() noexcept override { size_ = 0; }
  size_t size() const noexcept override { return size_; }
  SelectorOptions options() const override;

 private:
  std::optional<uint64_t> seed_;
  std::mt19937_64 rng_;
  size_t size_ = 0;
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_UNIFORM_SELECTOR_H_

// Chooses item i with probability w_i / sum(w), where w = priority ^ exponent
// and a priority of 0 always weighs 0 (so exponent 0 weighs every non-zero
// priority 1 and still never picks zero-priority items). When every weight is
// 0 it falls back to uniform choice. Backed by a SumTree whose leaves are the
// owner's slots: O(log n) for every operation, 8 bytes per item (plus ~1/7
// of that for the inner nodes).
#ifndef RESOUND_SELECTORS_PRIORITIZED_SELECTOR_H_
#define RESOUND_SELECTORS_PRIORITIZED_SELECTOR_H_

#include <optional>
#include <random>
#include <vector>

#include "resound/selectors/slot_selector.h"
#include "resound/selectors/sum_tree.h"

namespace resound {

class PrioritizedSelector final : public SlotSelector {
 public:
  // Throws InvalidArgumentError unless `priority_exponent` is finite and >= 0.
  explicit PrioritizedSelector(double priority_exponent, std::optional<uint64_t> seed = std::nullopt);

  // Priorities must be finite and >= 0, and priority ^ exponent finite.
  void ValidatePriority(double priority) const override;
  void Append(double priority) override;
  void Update(size_t slot, double priority) override;
  void Remove(size_t slot) override;
  SlotSelection Sample() override;
  void SampleMany(size_t count, SlotSelection* out) override;
  double Probability(size_t slot) const override;
  void Clear() noexcept override { tree_.Clear(); }
  size_t size() const noexcept override { return tree_.size(); }
  SelectorOptions options() const override;

 private:
  double Weight(double priority) const noexcept;

  double exponent_;
  std::optional<uint64_t> seed_;
  std::mt19937_64 rng_;
  SumTree tree_;  // leaf i weighs slot i
  // Scratch space for SampleMany, kept to avoid an allocation per batch.
  std::vector<double> targets_;
  std::vector<size_t> leaves_;
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_PRIORITIZED_SELECTOR_H_

// Chooses item i with probability w_i / sum(w), where w = priority ^ exponent
// and a priority of 0 always weighs 0 (so exponent 0 weighs every non-zero
// priority 1 and still never picks zero-priority items). When every weight is
// 0 it falls back to uniform choice. Backed by a SumTree: O(log n) for every
// operation. Keys sit densely in the tree's leaves; a delete moves the last
// leaf into the hole.
#ifndef RESOUND_SELECTORS_PRIORITIZED_SELECTOR_H_
#define RESOUND_SELECTORS_PRIORITIZED_SELECTOR_H_

#include <optional>
#include <random>
#include <vector>

#include "resound/key_map.h"
#include "resound/selectors/item_selector.h"
#include "resound/selectors/sum_tree.h"

namespace resound {

class PrioritizedSelector final : public ItemSelector {
 public:
  // Throws InvalidArgumentError unless `priority_exponent` is finite and >= 0.
  explicit PrioritizedSelector(double priority_exponent, std::optional<uint64_t> seed = std::nullopt);

  // Priorities must be finite and >= 0, and priority ^ exponent finite.
  void ValidatePriority(double priority) const override;
  void Insert(uint64_t key, double priority) override;
  void Update(uint64_t key, double priority) override;
  void Delete(uint64_t key) override;
  Selection Sample() override;
  void SampleMany(size_t count, Selection* out) override;
  void Clear() noexcept override;
  size_t size() const noexcept override { return keys_.size(); }
  bool Contains(uint64_t key) const noexcept override { return index_.Contains(key); }
  SelectorOptions options() const override;

  // The probability with which Sample() would choose `key` now.
  double Probability(uint64_t key) const;

 private:
  double Weight(double priority) const noexcept;
  size_t IndexOf(uint64_t key) const;

  double exponent_;
  std::optional<uint64_t> seed_;
  std::mt19937_64 rng_;
  std::vector<uint64_t> keys_;  // leaf index -> key
  KeyMap<size_t> index_;  // key -> leaf index
  SumTree tree_;
  // Scratch space for SampleMany, kept to avoid an allocation per batch.
  std::vector<double> targets_;
  std::vector<size_t> leaves_;
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_PRIORITIZED_SELECTOR_H_

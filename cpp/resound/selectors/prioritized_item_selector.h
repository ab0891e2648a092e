// An ItemSelector over a PrioritizedSelector that can also tell the
// probability of choosing a given key (resound._core.PrioritizedSelector).
#ifndef RESOUND_SELECTORS_PRIORITIZED_ITEM_SELECTOR_H_
#define RESOUND_SELECTORS_PRIORITIZED_ITEM_SELECTOR_H_

#include <cstdint>
#include <optional>

#include "resound/selectors/item_selector.h"

namespace resound {

class PrioritizedItemSelector final : public ItemSelector {
 public:
  // Throws InvalidArgumentError unless `priority_exponent` is finite and >= 0.
  explicit PrioritizedItemSelector(double priority_exponent, std::optional<uint64_t> seed = std::nullopt);

  // The probability with which Sample() would choose `key` now; throws
  // NotFoundError for a missing key.
  double Probability(uint64_t key) const;
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_PRIORITIZED_ITEM_SELECTOR_H_

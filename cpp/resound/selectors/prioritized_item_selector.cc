#include "resound/selectors/prioritized_item_selector.h"

#include <memory>

#include "resound/selectors/prioritized_selector.h"

namespace resound {

PrioritizedItemSelector::PrioritizedItemSelector(double priority_exponent, std::optional<uint64_t> seed)
    : ItemSelector(std::make_unique<PrioritizedSelector>(priority_exponent, seed)) {}

double PrioritizedItemSelector::Probability(uint64_t key) const { return slots().Probability(SlotOf(key)); }

}  // namespace resound

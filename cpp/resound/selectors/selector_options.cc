#include "resound/selectors/selector_options.h"

#include <sstream>

#include "resound/errors.h"
#include "resound/selectors/heap_selector.h"
#include "resound/selectors/insertion_order_selector.h"
#include "resound/selectors/item_selector.h"
#include "resound/selectors/prioritized_item_selector.h"
#include "resound/selectors/prioritized_selector.h"
#include "resound/selectors/uniform_selector.h"

namespace resound {

std::string SelectorOptions::kind_name() const {
  switch (kind) {
    case SelectorKind::kUniform:
      return "uniform";
    case SelectorKind::kPrioritized:
      return "prioritized";
    case SelectorKind::kFifo:
      return "fifo";
    case SelectorKind::kLifo:
      return "lifo";
    case SelectorKind::kMinHeap:
      return "min_heap";
    case SelectorKind::kMaxHeap:
      return "max_heap";
  }
  return "unknown";
}

bool SelectorOptions::is_deterministic() const noexcept {
  return kind != SelectorKind::kUniform && kind != SelectorKind::kPrioritized;
}

std::string SelectorOptions::ToString() const {
  std::ostringstream out;
  switch (kind) {
    case SelectorKind::kUniform:
      out << "UniformSelector()";
      break;
    case SelectorKind::kPrioritized:
      out << "PrioritizedSelector(priority_exponent=" << priority_exponent << ")";
      break;
    case SelectorKind::kFifo:
      out << "FifoSelector()";
      break;
    case SelectorKind::kLifo:
      out << "LifoSelector()";
      break;
    case SelectorKind::kMinHeap:
      out << "HeapSelector(min_heap=True)";
      break;
    case SelectorKind::kMaxHeap:
      out << "HeapSelector(min_heap=False)";
      break;
  }
  return out.str();
}

SelectorKind ParseSelectorKind(const std::string& name) {
  if (name == "uniform") return SelectorKind::kUniform;
  if (name == "prioritized") return SelectorKind::kPrioritized;
  if (name == "fifo") return SelectorKind::kFifo;
  if (name == "lifo") return SelectorKind::kLifo;
  if (name == "min_heap") return SelectorKind::kMinHeap;
  if (name == "max_heap") return SelectorKind::kMaxHeap;
  throw InvalidArgumentError(
      "selector kind must be one of 'uniform', 'prioritized', 'fifo', 'lifo', 'min_heap', "
      "'max_heap'; got '" + name + "'");
}

std::unique_ptr<SlotSelector> MakeSlotSelector(const SelectorOptions& options) {
  switch (options.kind) {
    case SelectorKind::kUniform:
      return std::make_unique<UniformSelector>(options.seed);
    case SelectorKind::kPrioritized:
      return std::make_unique<PrioritizedSelector>(options.priority_exponent, options.seed);
    case SelectorKind::kFifo:
      return std::make_unique<InsertionOrderSelector>(InsertionOrderSelector::Order::kOldestFirst);
    case SelectorKind::kLifo:
      return std::make_unique<InsertionOrderSelector>(InsertionOrderSelector::Order::kNewestFirst);
    case SelectorKind::kMinHeap:
      return std::make_unique<HeapSelector>(/*min_heap=*/true);
    case SelectorKind::kMaxHeap:
      return std::make_unique<HeapSelector>(/*min_heap=*/false);
  }
  throw InvalidArgumentError("unknown selector kind");
}

std::unique_ptr<ItemSelector> MakeSelector(const SelectorOptions& options) {
  // Python code downcasts to PrioritizedSelector for probability().
  if (options.kind == SelectorKind::kPrioritized) {
    return std::make_unique<PrioritizedItemSelector>(options.priority_exponent, options.seed);
  }
  return std::make_unique<ItemSelector>(MakeSlotSelector(options));
}

}  // namespace resound

// What kind of selector a table uses and how it is set up. Tables are built
// from options rather than selector objects so that every table owns fresh,
// unshared selector state.
#ifndef RESOUND_SELECTORS_SELECTOR_OPTIONS_H_
#define RESOUND_SELECTORS_SELECTOR_OPTIONS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace resound {

class ItemSelector;
class SlotSelector;

enum class SelectorKind { kUniform, kPrioritized, kFifo, kLifo, kMinHeap, kMaxHeap };

struct SelectorOptions {
  SelectorKind kind = SelectorKind::kUniform;
  double priority_exponent = 0.0;  // Prioritized only
  std::optional<uint64_t> seed;    // random selectors: fixed seed for reproducible runs

  // "uniform", "prioritized", "fifo", "lifo", "min_heap", "max_heap".
  std::string kind_name() const;
  // Fifo, Lifo and the heaps always choose the same item for the same state.
  bool is_deterministic() const noexcept;
  // Human-readable, e.g. "PrioritizedSelector(priority_exponent=0.6)".
  std::string ToString() const;
};

// Parses a kind name; throws InvalidArgumentError listing the allowed names.
SelectorKind ParseSelectorKind(const std::string& name);

// Builds a fresh selector addressed by key (a PrioritizedItemSelector for
// kPrioritized). Throws InvalidArgumentError for a bad exponent.
std::unique_ptr<ItemSelector> MakeSelector(const SelectorOptions& options);
// Builds a fresh selector addressed by slot, as a table uses it. Throws
// InvalidArgumentError for a bad exponent.
std::unique_ptr<SlotSelector> MakeSlotSelector(const SelectorOptions& options);

}  // namespace resound

#endif  // RESOUND_SELECTORS_SELECTOR_OPTIONS_H_

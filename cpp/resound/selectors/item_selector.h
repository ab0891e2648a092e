// The interface every selector implements. A table keeps two selectors, a
// sampler and a remover, and applies every insert, update and delete to both.
// Selectors are not thread-safe: the owning table calls them under its lock.
#ifndef RESOUND_SELECTORS_ITEM_SELECTOR_H_
#define RESOUND_SELECTORS_ITEM_SELECTOR_H_

#include <cstddef>
#include <cstdint>

#include "resound/selectors/selector_options.h"

namespace resound {

// The key a selector chose and the probability with which it chose it.
struct Selection {
  uint64_t key = 0;
  double probability = 0.0;
};

class ItemSelector {
 public:
  virtual ~ItemSelector() = default;

  // Throws InvalidArgumentError if this selector cannot hold `priority`.
  // The table calls it before taking its lock, so the mutating methods below
  // never fail half-way through a table operation.
  virtual void ValidatePriority(double priority) const;

  // Insert throws InvalidArgumentError for a key already present (or a bad
  // priority); Update and Delete throw NotFoundError for a missing key.
  virtual void Insert(uint64_t key, double priority) = 0;
  virtual void Update(uint64_t key, double priority) = 0;
  virtual void Delete(uint64_t key) = 0;
  // Chooses a key; throws FailedPreconditionError when empty.
  virtual Selection Sample() = 0;
  // `count` independent choices from the current state (the same as calling
  // Sample() `count` times); selectors override it when batching is faster.
  virtual void SampleMany(size_t count, Selection* out);
  virtual void Clear() noexcept = 0;
  virtual size_t size() const noexcept = 0;
  virtual bool Contains(uint64_t key) const noexcept = 0;
  virtual SelectorOptions options() const = 0;

 protected:
  ItemSelector() = default;
  ItemSelector(const ItemSelector&) = delete;
  ItemSelector& operator=(const ItemSelector&) = delete;
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_ITEM_SELECTOR_H_

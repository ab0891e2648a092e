// Fifo and Lifo: chooses the oldest (Fifo) or newest (Lifo) inserted item.
// Updates keep an item's place. A linked list plus a key index gives O(1)
// insert, delete of any key, and sample.
#ifndef RESOUND_SELECTORS_INSERTION_ORDER_SELECTOR_H_
#define RESOUND_SELECTORS_INSERTION_ORDER_SELECTOR_H_

#include <list>

#include "resound/key_map.h"
#include "resound/selectors/item_selector.h"

namespace resound {

class InsertionOrderSelector final : public ItemSelector {
 public:
  enum class Order { kOldestFirst, kNewestFirst };
  explicit InsertionOrderSelector(Order order) noexcept : order_(order) {}

  void Insert(uint64_t key, double priority) override;
  void Update(uint64_t key, double priority) override;
  void Delete(uint64_t key) override;
  Selection Sample() override;
  void Clear() noexcept override;
  size_t size() const noexcept override { return index_.size(); }
  bool Contains(uint64_t key) const noexcept override { return index_.Contains(key); }
  SelectorOptions options() const override;

 private:
  Order order_;
  std::list<uint64_t> keys_;  // oldest at the front
  KeyMap<std::list<uint64_t>::iterator> index_;
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_INSERTION_ORDER_SELECTOR_H_

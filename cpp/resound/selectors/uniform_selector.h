// Chooses every item with the same probability, 1/n, in O(1): keys live in a
// dense array and a delete moves the last key into the hole.
#ifndef RESOUND_SELECTORS_UNIFORM_SELECTOR_H_
#define RESOUND_SELECTORS_UNIFORM_SELECTOR_H_

#include <optional>
#include <random>
#include <vector>

#include "resound/key_map.h"
#include "resound/selectors/item_selector.h"

namespace resound {

class UniformSelector final : public ItemSelector {
 public:
  explicit UniformSelector(std::optional<uint64_t> seed = std::nullopt);

  void Insert(uint64_t key, double priority) override;
  void Update(uint64_t key, double priority) override;
  void Delete(uint64_t key) override;
  Selection Sample() override;
  void Clear() noexcept override;
  size_t size() const noexcept override { return keys_.size(); }
  bool Contains(uint64_t key) const noexcept override { return index_.Contains(key); }
  SelectorOptions options() const override;

 private:
  std::optional<uint64_t> seed_;
  std::mt19937_64 rng_;
  std::vector<uint64_t> keys_;
  KeyMap<size_t> index_;  // key -> position in keys_
};

}  // namespace resound

#endif  // RESOUND_SELECTORS_UNIFORM_SELECTOR_H_

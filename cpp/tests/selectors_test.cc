// Exercises every selector through the ItemSelector interface with many
// random operations, checking order and probabilities against simple
// reference models. Mostly here so that AddressSanitizer/UBSan runs see the
// selector code paths without Python in between.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "check.h"
#include "resound/errors.h"
#include "resound/selectors/item_selector.h"
#include "resound/selectors/sum_tree.h"

namespace resound {
namespace {

struct Reference {
  // key -> (priority, stamp of last insert/update, insertion stamp)
  struct Entry {
    double priority;
    uint64_t touched;
    uint64_t inserted;
  };
  std::map<uint64_t, Entry> entries;
  uint64_t clock = 0;

  uint64_t Expected(SelectorKind kind) const {
    auto best = entries.begin();
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      const auto& e = it->second;
      const auto& b = best->second;
      switch (kind) {
        case SelectorKind::kFifo:
          if (e.inserted < b.inserted) best = it;
          break;
        case SelectorKind::kLifo:
          if (e.inserted > b.inserted) best = it;
          break;
        case SelectorKind::kMinHeap:
          if (e.priority < b.priority || (e.priority == b.priority && e.touched < b.touched)) best = it;
          break;
        case SelectorKind::kMaxHeap:
          if (e.priority > b.priority || (e.priority == b.priority && e.touched < b.touched)) best = it;
          break;
        default:
          break;
      }
    }
    return best->first;
  }
};

void RandomOperations(SelectorKind kind, uint64_t seed) {
  auto selector = MakeSelector({kind, 0.7, seed});
  Reference reference;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> key_dist(0, 300);
  std::uniform_int_distribution<int> priority_dist(0, 5);
  for (int step = 0; step < 20000; ++step) {
    const uint64_t key = key_dist(rng);
    const double priority = priority_dist(rng);
    const bool present = reference.entries.count(key) != 0;
    switch (rng() % 4) {
      case 0:
      case 1:
        if (present) {
          bool threw = false;
          try {
            selector->Insert(key, priority);
          } catch (const InvalidArgumentError&) {
            threw = true;
          }
          RESOUND_CHECK(threw);
        } else {
          selector->Insert(key, priority);
          ++reference.clock;
          reference.entries[key] = {priority, reference.clock, reference.clock};
        }
        break;
      case 2:
        if (present) {
          selector->Update(key, priority);
          ++reference.clock;
          reference.entries[key].priority = priority;
          reference.entries[key].touched = reference.clock;
        }
        break;
      case 3:
        if (present) {
          selector->Delete(key);
          reference.entries.erase(key);
        } else {
          bool threw = false;
          try {
            selector->Delete(key);
          } catch (const NotFoundError&) {
            threw = true;
          }
          RESOUND_CHECK(threw);
        }
        break;
    }
    RESOUND_CHECK(selector->size() == reference.entries.size());
    if (reference.entries.empty()) continue;
    const Selection selection = selector->Sample();
    RESOUND_CHECK(reference.entries.count(selection.key) == 1);
    if (kind == SelectorKind::kUniform) {
      RESOUND_CHECK(selection.probability == 1.0 / static_cast<double>(reference.entries.size()));
    } else if (kind == SelectorKind::kPrioritized) {
      double total = 0;
      for (const auto& [k, e] : reference.entries) total += e.priority == 0 ? 0 : std::pow(e.priority, 0.7);
      const double p = reference.entries[selection.key].priority;
      const double expected = total > 0 ? std::pow(p, 0.7) / total : 1.0 / static_cast<double>(reference.entries.size());
      RESOUND_CHECK(std::abs(selection.probability - expected) <= 1e-9 * std::max(1.0, expected));
      RESOUND_CHECK(total == 0 || p > 0);
    } else {
      RESOUND_CHECK(selection.probability == 1.0);
      RESOUND_CHECK(selection.key == reference.Expected(kind));
    }
  }
  selector->Clear();
  RESOUND_CHECK(selector->size() == 0);
}

// The tree stores only the groups of nodes its leaves need: grow and shrink
// it across level boundaries and check weights, totals and searches against
// a plain array.
void SumTreeResizing(uint64_t seed) {
  SumTree tree;
  std::vector<double> weights;
  std::mt19937_64 rng(seed);
  for (const size_t size : {size_t{1}, size_t{9}, size_t{4000}, size_t{63}, size_t{0}, size_t{520}, size_t{70000},
                            size_t{7}, size_t{600}}) {
    tree.Resize(size);
    weights.resize(size, 0.0);
    RESOUND_CHECK(tree.size() == size && tree.capacity() >= std::max<size_t>(size, 1));
    for (size_t i = 0; i < size; ++i) RESOUND_CHECK(tree.Get(i) == weights[i]);
    for (size_t n = 0; n < std::min<size_t>(size, 300); ++n) {
      const size_t index = rng() % size;
      weights[index] = static_cast<double>(rng() % 4);  // small integers: sums are exact
      tree.Set(index, weights[index]);
    }
    double total = 0;
    for (const double w : weights) total += w;
    RESOUND_CHECK(tree.Total() == total);
    if (total == 0) continue;
    for (int n = 0; n < 100; ++n) {
      const double target = static_cast<double>(rng() % static_cast<uint64_t>(total)) + 0.5;
      const size_t leaf = tree.Find(target);
      double before = 0;
      for (size_t i = 0; i < leaf; ++i) before += weights[i];
      RESOUND_CHECK(weights[leaf] > 0 && before <= target && target < before + weights[leaf]);
    }
  }
}

}  // namespace
}  // namespace resound

int main() {
  resound::SumTreeResizing(7);
  using resound::SelectorKind;
  for (SelectorKind kind : {SelectorKind::kUniform, SelectorKind::kPrioritized, SelectorKind::kFifo,
                            SelectorKind::kLifo, SelectorKind::kMinHeap, SelectorKind::kMaxHeap}) {
    resound::RandomOperations(kind, 42);
  }
  std::printf("selectors_test: OK\n");
  return 0;
}

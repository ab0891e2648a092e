// Random inserts, erases and lookups on KeyMap checked against
// std::unordered_map. Keys are drawn from small ranges and from multiples of
// a large power of two so that probe runs collide and wrap around the end of
// the slot array, which is where backward-shift deletion can go wrong. Both
// slot layouts run: with an in-use flag, and with values that mark free
// slots themselves (8-byte values beside whole keys, 4-byte values beside
// keys split in halves).
#include <cstdint>
#include <cstdio>
#include <random>
#include <unordered_map>

#include "check.h"
#include "resound/key_map.h"

namespace resound {
namespace {

// The value stored for a key: never zero and never a type's maximum, so it
// suits every policy below, and different for nearby keys.
template <typename V>
V ValueFor(uint64_t key) {
  return static_cast<V>(((key ^ 0xABCDEF) & 0x7FFFFFFF) | 1);
}

template <typename Map, typename V>
void Run(uint64_t seed, uint64_t key_range, uint64_t key_stride) {
  Map map;
  std::unordered_map<uint64_t, V> reference;
  std::mt19937_64 rng(seed);
  for (int step = 0; step < 200000; ++step) {
    const uint64_t key = (rng() % key_range) * key_stride;
    switch (rng() % 3) {
      case 0: {
        const auto [value, inserted] = map.TryEmplace(key, ValueFor<V>(key));
        RESOUND_CHECK(inserted == (reference.count(key) == 0));
        RESOUND_CHECK(*value == ValueFor<V>(key));
        reference.emplace(key, ValueFor<V>(key));
        break;
      }
      case 1:
        RESOUND_CHECK(map.Erase(key) == (reference.erase(key) == 1));
        break;
      default: {
        const V* value = map.Find(key);
        RESOUND_CHECK((value != nullptr) == (reference.count(key) == 1));
        if (value != nullptr) RESOUND_CHECK(*value == reference.at(key));
      }
    }
    RESOUND_CHECK(map.size() == reference.size());
    if (step % 50000 == 0) {
      size_t visited = 0;
      map.ForEach([&](uint64_t k, V v) {
        RESOUND_CHECK(reference.at(k) == v);
        ++visited;
      });
      RESOUND_CHECK(visited == reference.size());
    }
  }
  for (const auto& [key, value] : reference) RESOUND_CHECK(*map.Find(key) == value);
  map.Clear();
  RESOUND_CHECK(map.size() == 0 && map.Find(reference.begin()->first) == nullptr);
}

}  // namespace
}  // namespace resound

template <typename Map, typename V>
void RunAll(uint64_t seed) {
  resound::Run<Map, V>(seed, 40, 1);
  resound::Run<Map, V>(seed + 1, 3000, 1);
  resound::Run<Map, V>(seed + 2, 500, uint64_t{1} << 40);
  resound::Run<Map, V>(seed + 3, 500, uint64_t{1} << 32);  // keys that differ only in their high half
  resound::Run<Map, V>(seed + 4, 100000, 0x9E3779B97F4A7C15ULL);
}

int main() {
  using resound::KeyMap;
  using resound::KeyMapMaxIsEmpty;
  using resound::KeyMapZeroIsEmpty;
  using Flagged = KeyMap<uint64_t>;
  using Plain = KeyMap<uint64_t, KeyMapZeroIsEmpty>;
  using Split = KeyMap<uint32_t, KeyMapZeroIsEmpty>;
  using SplitMax = KeyMap<uint32_t, KeyMapMaxIsEmpty>;
  // The plain layout is a key and a value per slot, no flag (16 bytes, not
  // 24); a 4-byte value beside a split key makes 12 bytes.
  RESOUND_CHECK(Plain().memory_bytes() * 3 == Flagged().memory_bytes() * 2);
  RESOUND_CHECK(Split().memory_bytes() * 4 == Plain().memory_bytes() * 3);
  RESOUND_CHECK(SplitMax().memory_bytes() == Split().memory_bytes());
  RunAll<Flagged, uint64_t>(1);
  RunAll<Plain, uint64_t>(11);
  RunAll<Split, uint32_t>(21);
  RunAll<SplitMax, uint32_t>(31);
  // A freshly grown max-is-empty map reads every new slot as free.
  SplitMax grown;
  for (uint32_t i = 0; i < 1000; ++i) grown.TryEmplace(i, i);
  for (uint32_t i = 0; i < 1000; ++i) RESOUND_CHECK(grown.Find(i) != nullptr && *grown.Find(i) == i);
  RESOUND_CHECK(grown.Find(1000) == nullptr && grown.size() == 1000);
  std::printf("key_map_test: OK\n");
  return 0;
}

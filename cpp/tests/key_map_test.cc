// Random inserts, erases and lookups on KeyMap checked against
// std::unordered_map. Keys are drawn from small ranges and from multiples of
// a large power of two so that probe runs collide and wrap around the end of
// the slot array, which is where backward-shift deletion can go wrong. Both
// slot layouts run: with an in-use flag, and with values that mark free
// slots themselves.
#include <cstdint>
#include <cstdio>
#include <random>
#include <unordered_map>

#include "check.h"
#include "resound/key_map.h"

namespace resound {
namespace {

// Zero marks a free slot; the values stored below are never zero.
struct ZeroIsEmpty {
  static bool IsEmpty(uint64_t value) noexcept { return value == 0; }
};

template <typename Map>
void Run(uint64_t seed, uint64_t key_range, uint64_t key_stride) {
  Map map;
  std::unordered_map<uint64_t, uint64_t> reference;
  std::mt19937_64 rng(seed);
  for (int step = 0; step < 200000; ++step) {
    const uint64_t key = (rng() % key_range) * key_stride;
    switch (rng() % 3) {
      case 0: {
        const auto [value, inserted] = map.TryEmplace(key, (key ^ 0xABCDEF) | 1);
        RESOUND_CHECK(inserted == (reference.count(key) == 0));
        RESOUND_CHECK(*value == ((key ^ 0xABCDEF) | 1));
        reference.emplace(key, (key ^ 0xABCDEF) | 1);
        break;
      }
      case 1:
        RESOUND_CHECK(map.Erase(key) == (reference.erase(key) == 1));
        break;
      default: {
        const uint64_t* value = map.Find(key);
        RESOUND_CHECK((value != nullptr) == (reference.count(key) == 1));
        if (value != nullptr) RESOUND_CHECK(*value == reference.at(key));
      }
    }
    RESOUND_CHECK(map.size() == reference.size());
    if (step % 50000 == 0) {
      size_t visited = 0;
      map.ForEach([&](uint64_t k, uint64_t v) {
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

int main() {
  using Flagged = resound::KeyMap<uint64_t>;
  using Plain = resound::KeyMap<uint64_t, resound::ZeroIsEmpty>;
  // The plain layout is a key and a value per slot, no flag.
  RESOUND_CHECK(Plain().memory_bytes() * 3 == Flagged().memory_bytes() * 2);
  resound::Run<Flagged>(1, 40, 1);
  resound::Run<Flagged>(2, 3000, 1);
  resound::Run<Flagged>(3, 500, uint64_t{1} << 40);
  resound::Run<Flagged>(4, 100000, 0x9E3779B97F4A7C15ULL);
  resound::Run<Plain>(5, 40, 1);
  resound::Run<Plain>(6, 3000, 1);
  resound::Run<Plain>(7, 500, uint64_t{1} << 40);
  resound::Run<Plain>(8, 100000, 0x9E3779B97F4A7C15ULL);
  std::printf("key_map_test: OK\n");
  return 0;
}

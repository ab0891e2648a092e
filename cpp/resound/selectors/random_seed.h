// Seeding for the random selectors: a fixed seed makes runs reproducible
// (tests, benchmarks); otherwise each selector draws its own from the OS.
#ifndef RESOUND_SELECTORS_RANDOM_SEED_H_
#define RESOUND_SELECTORS_RANDOM_SEED_H_

#include <cstdint>
#include <optional>
#include <random>

namespace resound {

inline uint64_t SeedOrRandom(std::optional<uint64_t> seed) {
  if (seed.has_value()) return *seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace resound

#endif  // RESOUND_SELECTORS_RANDOM_SEED_H_

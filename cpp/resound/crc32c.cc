#include "resound/crc32c.h"

#include <array>
#include <cstddef>
#include <cstring>

namespace resound {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? kPolynomial : 0);
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = MakeTable();

uint32_t UpdateBytewise(uint32_t crc, const unsigned char* data, size_t size) noexcept {
  for (size_t i = 0; i < size; ++i) crc = kTable[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) uint32_t UpdateHardware(uint32_t crc, const unsigned char* data,
                                                          size_t size) noexcept {
  uint64_t wide = crc;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);
    wide = __builtin_ia32_crc32di(wide, word);
    data += 8;
    size -= 8;
  }
  crc = static_cast<uint32_t>(wide);
  while (size > 0) {
    crc = __builtin_ia32_crc32qi(crc, *data);
    ++data;
    --size;
  }
  return crc;
}

bool HasHardwareCrc() noexcept {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t Crc32c(uint32_t crc, std::span<const std::byte> data) noexcept {
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  crc = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (HasHardwareCrc()) return ~UpdateHardware(crc, bytes, data.size());
#endif
  return ~UpdateBytewise(crc, bytes, data.size());
}

}  // namespace resound

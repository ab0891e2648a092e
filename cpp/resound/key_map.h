// A hash map from 64-bit keys to values, stored flat: open addressing with
// linear probing in one array of slots. A lookup usually touches a single
// cache line (a node-based std::unordered_map touches at least two), slots
// can be prefetched before they are needed, and there is no allocation per
// entry. Deletion shifts later entries back instead of leaving tombstones,
// so lookups stay short under heavy insert/delete churn.
//
// Pointers to values are invalidated by any insert or erase.
#ifndef RESOUND_KEY_MAP_H_
#define RESOUND_KEY_MAP_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace resound {

template <typename V>
class KeyMap {
 public:
  KeyMap() { Rehash(kMinCapacity); }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  V* Find(uint64_t key) noexcept {
    for (size_t i = Home(key);; i = Next(i)) {
      Slot& slot = slots_[i];
      if (!slot.used) return nullptr;
      if (slot.key == key) return &slot.value;
    }
  }
  const V* Find(uint64_t key) const noexcept { return const_cast<KeyMap*>(this)->Find(key); }
  bool Contains(uint64_t key) const noexcept { return Find(key) != nullptr; }

  // Brings the slot where `key` would start its probe into cache.
  void Prefetch(uint64_t key) const noexcept { __builtin_prefetch(&slots_[Home(key)]); }

  // Inserts `value` under `key` unless the key is present. Returns the stored
  // value and whether it was inserted.
  std::pair<V*, bool> TryEmplace(uint64_t key, V value) {
    if (V* existing = Find(key)) return {existing, false};
    if ((size_ + 1) * kMaxLoadDen > slots_.size() * kMaxLoadNum) Rehash(slots_.size() * 2);
    size_t i = Home(key);
    while (slots_[i].used) i = Next(i);
    slots_[i].used = true;
    slots_[i].key = key;
    slots_[i].value = std::move(value);
    ++size_;
    return {&slots_[i].value, true};
  }

  // Removes `key`; returns false if it was absent.
  bool Erase(uint64_t key) noexcept {
    size_t hole = Home(key);
    while (true) {
      if (!slots_[hole].used) return false;
      if (slots_[hole].key == key) break;
      hole = Next(hole);
    }
    // Backward-shift: move later entries of the same probe run into the hole
    // when the hole lies on their path from their home slot.
    for (size_t j = Next(hole);; j = Next(j)) {
      Slot& slot = slots_[j];
      if (!slot.used) break;
      const size_t home = Home(slot.key);
      const bool hole_on_path = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
      if (hole_on_path) {
        slots_[hole].key = slot.key;
        slots_[hole].value = std::move(slot.value);
        hole = j;
      }
    }
    slots_[hole].used = false;
    slots_[hole].value = V();
    --size_;
    return true;
  }

  void Clear() {
    std::vector<Slot>().swap(slots_);
    size_ = 0;
    Rehash(kMinCapacity);
  }

  template <typename F>
  void ForEach(F&& visit) const {
    for (const Slot& slot : slots_) {
      if (slot.used) visit(slot.key, slot.value);
    }
  }

  // Bytes held by the slot array (for memory accounting).
  size_t memory_bytes() const noexcept { return slots_.capacity() * sizeof(Slot); }

 private:
  static constexpr size_t kMinCapacity = 16;
  // Grow beyond 70 % full: linear probing stays short below that.
  static constexpr size_t kMaxLoadNum = 7;
  static constexpr size_t kMaxLoadDen = 10;

  struct Slot {
    uint64_t key = 0;
    bool used = false;
    V value{};
  };

  size_t Home(uint64_t key) const noexcept {
    // Fibonacci hashing: sequential keys spread over the whole table.
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_);
  }
  size_t Next(size_t i) const noexcept { return (i + 1) & (slots_.size() - 1); }

  void Rehash(size_t capacity) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.resize(capacity);
    shift_ = 64 - std::countr_zero(capacity);
    for (Slot& slot : old) {
      if (!slot.used) continue;
      size_t i = Home(slot.key);
      while (slots_[i].used) i = Next(i);
      slots_[i].used = true;
      slots_[i].key = slot.key;
      slots_[i].value = std::move(slot.value);
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
  int shift_ = 60;
};

}  // namespace resound

#endif  // RESOUND_KEY_MAP_H_

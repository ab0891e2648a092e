// A hash map from 64-bit keys to values, stored flat: open addressing with
// linear probing in one array of slots. A lookup usually touches a single
// cache line (a node-based std::unordered_map touches at least two), and
// there is no allocation per entry. Deletion shifts later entries back
// instead of leaving tombstones, so lookups stay short under heavy
// insert/delete churn.
//
// Probing is Robin Hood: an entry further from its home slot takes the place
// of one nearer to its own, so every run stays sorted by home slot, a miss
// stops as soon as it passes where the key would be, and probe lengths stay
// short up to a load of 7/8. Tables hold one entry per item or chunk, so the
// high load matters: it is what keeps the slot array near 16-24 bytes per
// entry rather than 2-3 times that.
//
// For the same reason the slot array grows by a quarter, not by doubling:
// doubling leaves the load anywhere between 7/16 and 7/8 depending on where
// the number of entries falls (a table of 1M items sat at 48 %, so each
// entry cost twice its slot), while growing by 1.25x keeps it between 70 %
// and 87.5 %. The price is more rehashing (each entry is moved about four
// times over the map's growth instead of once, amortized into inserts) and
// a capacity that is not a power of two, so the home slot is found with a
// multiply-high rather than a shift.
//
// Pointers to values are invalidated by any insert or erase.
//
// By default every slot carries a flag saying whether it is in use, which
// with padding costs 8 bytes per slot for most value types. A value type with
// a "nothing here" state can instead name it through the `EmptyValue` policy,
// a type with `template <typename V> static V Empty() noexcept` and a static
// `IsEmpty(const V&) noexcept` (a template or not): a slot is then free exactly when its value is empty, and an empty value may not be
// inserted. Such a map of 4-byte values stores each key as two 32-bit halves,
// so a slot is 12 bytes rather than 16 padded ones.
#ifndef RESOUND_KEY_MAP_H_
#define RESOUND_KEY_MAP_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "resound/page_allocator.h"

namespace resound {

// The default policy: slots carry a separate in-use flag.
struct KeyMapUseFlag {};

// A policy for maps of counts that erase a key before its count reaches
// zero: a slot is free when its value is zero.
struct KeyMapZeroIsEmpty {
  template <typename V>
  static V Empty() noexcept {
    return V();
  }
  template <typename V>
  static bool IsEmpty(const V& value) noexcept {
    return value == V();
  }
};

// A policy for maps of indexes that never reach their type's maximum: a
// slot is free when its value is that maximum.
struct KeyMapMaxIsEmpty {
  template <typename V>
  static V Empty() noexcept {
    return std::numeric_limits<V>::max();
  }
  template <typename V>
  static bool IsEmpty(const V& value) noexcept {
    return value == std::numeric_limits<V>::max();
  }
};

template <typename V, typename EmptyValue = KeyMapUseFlag>
class KeyMap {
  // For the multiply-high in Home (a GCC/Clang extension; __extension__
  // keeps -Wpedantic quiet about it).
  __extension__ using Wide = unsigned __int128;

 public:
  KeyMap() : slots_(kMinCapacity), capacity_(kMinCapacity) {}

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  V* Find(uint64_t key) noexcept {
    const size_t i = IndexOf(key);
    return i == kAbsent ? nullptr : &slots_[i].value;
  }
  const V* Find(uint64_t key) const noexcept { return const_cast<KeyMap*>(this)->Find(key); }
  bool Contains(uint64_t key) const noexcept { return Find(key) != nullptr; }

  // Inserts `value` under `key` unless the key is present. Returns the stored
  // value and whether it was inserted. With an EmptyValue policy, `value`
  // must not be empty.
  std::pair<V*, bool> TryEmplace(uint64_t key, V value) {
    if (V* existing = Find(key)) return {existing, false};
    if ((size_ + 1) * kMaxLoadDen > capacity_ * kMaxLoadNum) Rehash(Grown(capacity_));
    ++size_;
    return {Place(key, std::move(value)), true};
  }

  // Removes `key`; returns false if it was absent.
  bool Erase(uint64_t key) noexcept {
    size_t hole = IndexOf(key);
    if (hole == kAbsent) return false;
    // Backward shift: runs are sorted by home slot, so every following entry
    // not at its home moves back one slot, up to the end of the run.
    for (size_t j = Next(hole); Used(slots_[j]) && Distance(KeyOf(slots_[j]), j) > 0; j = Next(j)) {
      SetKey(slots_[hole], KeyOf(slots_[j]));
      slots_[hole].value = std::move(slots_[j].value);
      hole = j;
    }
    Vacate(slots_[hole]);
    --size_;
    return true;
  }

  void Clear() {
    Slots fresh(kMinCapacity);  // if this throws, nothing changed
    slots_.swap(fresh);
    capacity_ = kMinCapacity;
    size_ = 0;
  }

  template <typename F>
  void ForEach(F&& visit) const {
    for (const Slot& slot : slots_) {
      if (Used(slot)) visit(KeyOf(slot), slot.value);
    }
  }

  // Bytes held by the slot array (for memory accounting).
  size_t memory_bytes() const noexcept { return slots_.capacity() * sizeof(Slot); }

 private:
  static constexpr size_t kMinCapacity = 16;
  // Grow beyond 7/8 full: Robin Hood probing stays short below that.
  static constexpr size_t kMaxLoadNum = 7;
  static constexpr size_t kMaxLoadDen = 8;

  static constexpr bool kUseFlag = std::is_same_v<EmptyValue, KeyMapUseFlag>;

  struct FlaggedSlot {
    uint64_t key = 0;
    bool used = false;
    V value{};
  };
  struct PlainSlot {
    uint64_t key = 0;
    V value = EmptyValue::template Empty<V>();
  };
  // Two halves keep the slot at 4-byte alignment: 12 bytes, not 16.
  struct SplitKeySlot {
    uint32_t key_low = 0;
    uint32_t key_high = 0;
    V value = EmptyValue::template Empty<V>();
  };
  static constexpr bool kSplitKey = !kUseFlag && sizeof(V) == 4 && alignof(V) <= 4;
  using Slot = std::conditional_t<kUseFlag, FlaggedSlot, std::conditional_t<kSplitKey, SplitKeySlot, PlainSlot>>;
  using Slots = PageVector<Slot>;

  static uint64_t KeyOf(const Slot& slot) noexcept {
    if constexpr (kSplitKey) {
      return uint64_t{slot.key_high} << 32 | slot.key_low;
    } else {
      return slot.key;
    }
  }
  static void SetKey(Slot& slot, uint64_t key) noexcept {
    if constexpr (kSplitKey) {
      slot.key_low = static_cast<uint32_t>(key);
      slot.key_high = static_cast<uint32_t>(key >> 32);
    } else {
      slot.key = key;
    }
  }

  static bool Used(const Slot& slot) noexcept {
    if constexpr (kUseFlag) {
      return slot.used;
    } else {
      return !EmptyValue::IsEmpty(slot.value);
    }
  }
  static void Occupy(Slot& slot, uint64_t key, V&& value) {
    if constexpr (kUseFlag) slot.used = true;
    SetKey(slot, key);
    slot.value = std::move(value);
  }
  static void Vacate(Slot& slot) noexcept {
    if constexpr (kUseFlag) {
      slot.used = false;
      slot.value = V();
    } else {
      slot.value = EmptyValue::template Empty<V>();
    }
  }

  // The next capacity: a quarter more (see the top of this file).
  static size_t Grown(size_t capacity) noexcept { return capacity + capacity / 4; }

  size_t Home(uint64_t key) const noexcept {
    // Fibonacci hashing spreads sequential keys over all 64 bits; the high
    // bits of hash * capacity then pick a slot in [0, capacity) evenly.
    const uint64_t hash = key * 0x9E3779B97F4A7C15ULL;
    return static_cast<size_t>((static_cast<Wide>(hash) * capacity_) >> 64);
  }
  size_t Next(size_t i) const noexcept { return i + 1 == capacity_ ? 0 : i + 1; }

  static constexpr size_t kAbsent = SIZE_MAX;
  size_t IndexOf(uint64_t key) const noexcept {
    for (size_t i = Home(key), distance = 0;; i = Next(i), ++distance) {
      const Slot& slot = slots_[i];
      // An entry nearer its home than `key` would be means `key` is absent.
      if (!Used(slot)) return kAbsent;
      const uint64_t resident = KeyOf(slot);
      if (Distance(resident, i) < distance) return kAbsent;
      if (resident == key) return i;
    }
  }
  // How far slot `i` is from the home slot of `key`.
  size_t Distance(uint64_t key, size_t i) const noexcept {
    const size_t home = Home(key);
    return i >= home ? i - home : i + capacity_ - home;
  }

  // Puts an absent key in (there is a free slot): walking from its home, it
  // takes the first slot whose entry is nearer its own home, and that entry
  // continues the walk in its place. Returns where `key` landed.
  V* Place(uint64_t key, V&& value) {
    V* placed = nullptr;
    for (size_t i = Home(key), distance = 0;; i = Next(i), ++distance) {
      Slot& slot = slots_[i];
      if (!Used(slot)) {
        Occupy(slot, key, std::move(value));
        return placed != nullptr ? placed : &slot.value;
      }
      const uint64_t resident_key = KeyOf(slot);
      const size_t resident = Distance(resident_key, i);
      if (resident < distance) {
        SetKey(slot, key);
        key = resident_key;
        std::swap(slot.value, value);
        if (placed == nullptr) placed = &slot.value;
        distance = resident;
      }
    }
  }

  // Allocates first, so a failed allocation leaves the map as it was; moving
  // the entries over cannot fail (keys and the values used here move and
  // swap without throwing).
  void Rehash(size_t capacity) {
    Slots old(capacity);
    old.swap(slots_);
    capacity_ = capacity;
    for (Slot& slot : old) {
      if (Used(slot)) Place(KeyOf(slot), std::move(slot.value));
    }
  }

  Slots slots_;
  size_t capacity_;  // slots_.size(), kept apart: the probes read it often
  size_t size_ = 0;
};

}  // namespace resound

#endif  // RESOUND_KEY_MAP_H_

// An allocator that lets std::allocate_shared place variable-size data right
// behind the shared_ptr control block, in the same allocation: the object,
// its control block and its variable part (a chunk's payload, an item's
// slices) then cost one heap block and one malloc header instead of three.
//
// Usage:
//   TrailingStorage storage{bytes};
//   auto object = std::allocate_shared<T>(TrailingAllocator<T>(&storage), storage, ...);
// allocate_shared allocates before it constructs, so T's constructor finds
// the address of its `bytes` of trailing storage in `storage.data` (aligned
// to kTrailingAlignment). The storage is freed with the control block, after
// T has been destroyed; T must destroy whatever it constructed there.
#ifndef RESOUND_TRAILING_ALLOCATOR_H_
#define RESOUND_TRAILING_ALLOCATOR_H_

#include <cstddef>
#include <new>

namespace resound {

inline constexpr size_t kTrailingAlignment = alignof(std::max_align_t);

// The request (how many bytes to add) and its result (where they are).
struct TrailingStorage {
  size_t bytes = 0;
  std::byte* data = nullptr;
};

template <typename T>
class TrailingAllocator {
 public:
  using value_type = T;

  // `storage` is only read and written inside allocate(), which
  // allocate_shared calls once, before it returns; the copy of this allocator
  // kept in the control block only deallocates, which needs no state.
  explicit TrailingAllocator(TrailingStorage* storage) noexcept : storage_(storage) {}
  template <typename U>
  TrailingAllocator(const TrailingAllocator<U>& other) noexcept : storage_(other.storage_) {}

  T* allocate(size_t n) {
    static_assert(alignof(T) <= kTrailingAlignment);
    const size_t head = (n * sizeof(T) + kTrailingAlignment - 1) / kTrailingAlignment * kTrailingAlignment;
    // Plain operator new returns memory aligned to at least max_align_t.
    auto* block = static_cast<std::byte*>(::operator new(head + storage_->bytes));
    storage_->data = block + head;
    return reinterpret_cast<T*>(block);
  }
  // Unsized: the size is no longer known once the request has gone, and
  // unsized delete is valid for any block from operator new.
  void deallocate(T* p, size_t) noexcept { ::operator delete(static_cast<void*>(p)); }

  template <typename U>
  friend bool operator==(const TrailingAllocator&, const TrailingAllocator<U>&) noexcept {
    return true;  // any instance can free what another allocated
  }

 private:
  template <typename U>
  friend class TrailingAllocator;
  TrailingStorage* storage_;
};

}  // namespace resound

#endif  // RESOUND_TRAILING_ALLOCATOR_H_

// Lets std::allocate_shared place variable-size data right behind the object
// and its shared_ptr control block, in the same allocation: a chunk with its
// payload, or an item with its slices, then costs one heap block and one
// malloc header instead of several.
//
// Usage:
//   TrailingStorage storage{bytes};
//   std::shared_ptr<T> object = AllocateSharedWithTrailing<T>(storage, args...);
// calls T(args..., storage) with `storage.data` pointing at `bytes` bytes
// aligned to kTrailingAlignment. They are freed with the control block, after
// T is destroyed; T must destroy whatever it constructed there.
//
// allocate_shared keeps a copy of its allocator in the control block for the
// object's whole life, so an allocator carrying the request would cost 8
// bytes per object (per chunk and per item, which is 16 with malloc's size
// classes). The allocator is therefore stateless: the request travels through
// a thread-local slot set only for the duration of the allocate_shared call,
// which reads it in its single allocate() before constructing anything.
#ifndef RESOUND_TRAILING_ALLOCATOR_H_
#define RESOUND_TRAILING_ALLOCATOR_H_

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace resound {

// Enough for the pointers and 64-bit numbers stored there (and for numpy
// to view a payload of any dtype); not 16, which would waste 8 bytes behind
// most objects.
inline constexpr size_t kTrailingAlignment = 8;

// The request (how many bytes to add) and its result (where they are).
struct TrailingStorage {
  size_t bytes = 0;
  std::byte* data = nullptr;
};

namespace trailing_internal {
// The request of the allocate_shared call running on this thread, if any.
inline thread_local TrailingStorage* pending = nullptr;
}  // namespace trailing_internal

template <typename T>
class TrailingAllocator {
 public:
  using value_type = T;

  TrailingAllocator() noexcept = default;
  template <typename U>
  TrailingAllocator(const TrailingAllocator<U>&) noexcept {}

  // Takes the pending request; only AllocateSharedWithTrailing sets one.
  T* allocate(size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t));
    TrailingStorage* request = std::exchange(trailing_internal::pending, nullptr);
    if (request == nullptr) throw std::bad_alloc();
    const size_t head = (n * sizeof(T) + kTrailingAlignment - 1) / kTrailingAlignment * kTrailingAlignment;
    // Plain operator new returns memory aligned to at least max_align_t.
    auto* block = static_cast<std::byte*>(::operator new(head + request->bytes));
    request->data = block + head;
    return reinterpret_cast<T*>(block);
  }
  // Unsized: the request is gone by now, and unsized delete is valid for any
  // block from operator new.
  void deallocate(T* p, size_t) noexcept { ::operator delete(static_cast<void*>(p)); }

  template <typename U>
  friend bool operator==(const TrailingAllocator&, const TrailingAllocator<U>&) noexcept {
    return true;  // stateless: any instance frees what another allocated
  }
};

template <typename T, typename... Args>
std::shared_ptr<T> AllocateSharedWithTrailing(TrailingStorage& storage, Args&&... args) {
  // Restores the slot however allocate_shared exits (it is already empty if
  // allocate() ran).
  struct Pending {
    explicit Pending(TrailingStorage& request) noexcept { trailing_internal::pending = &request; }
    ~Pending() { trailing_internal::pending = nullptr; }
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
  } pending(storage);
  return std::allocate_shared<T>(TrailingAllocator<T>(), std::forward<Args>(args)..., std::as_const(storage));
}

}  // namespace resound

#endif  // RESOUND_TRAILING_ALLOCATOR_H_

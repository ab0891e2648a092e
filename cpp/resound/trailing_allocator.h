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
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "resound/block_recycler.h"

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

// Where the blocks come from. HeapBlocks: operator new and delete. The
// allocator frees without knowing the size (the request is gone by then),
// which unsized delete allows.
struct HeapBlocks {
  static constexpr size_t kAlignment = alignof(std::max_align_t);
  static void* Allocate(size_t bytes) { return ::operator new(bytes); }
  static void Deallocate(void* block) noexcept { ::operator delete(block); }
};

// RecycledBlocks: BlockRecycler's shared free lists (see block_recycler.h),
// for blocks that are often freed on another thread than the one that made
// them. The block's size travels in an 8-byte header in front of it, which
// leaves the object 8-aligned (enough for chunks: see kTrailingAlignment).
struct RecycledBlocks {
  static constexpr size_t kHeader = sizeof(size_t);
  static constexpr size_t kAlignment = kHeader;
  static void* Allocate(size_t bytes) {
    const size_t total = bytes + kHeader;
    auto* block = static_cast<std::byte*>(BlockRecycler::Allocate(total));
    std::memcpy(block, &total, sizeof total);
    return block + kHeader;
  }
  static void Deallocate(void* data) noexcept {
    std::byte* const block = static_cast<std::byte*>(data) - kHeader;
    size_t total = 0;
    std::memcpy(&total, block, sizeof total);
    BlockRecycler::Deallocate(block, total);
  }
};

template <typename T, typename Blocks = HeapBlocks>
class TrailingAllocator {
  static_assert(Blocks::kAlignment >= kTrailingAlignment);
 public:
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = TrailingAllocator<U, Blocks>;
  };

  TrailingAllocator() noexcept = default;
  template <typename U>
  TrailingAllocator(const TrailingAllocator<U, Blocks>&) noexcept {}

  // Takes the pending request; only AllocateSharedWithTrailing sets one.
  T* allocate(size_t n) {
    static_assert(alignof(T) <= Blocks::kAlignment);
    TrailingStorage* request = std::exchange(trailing_internal::pending, nullptr);
    if (request == nullptr) throw std::bad_alloc();
    const size_t head = (n * sizeof(T) + kTrailingAlignment - 1) / kTrailingAlignment * kTrailingAlignment;
    // Aligned to Blocks::kAlignment, which is at least kTrailingAlignment.
    auto* block = static_cast<std::byte*>(Blocks::Allocate(head + request->bytes));
    request->data = block + head;
    return reinterpret_cast<T*>(block);
  }
  void deallocate(T* p, size_t) noexcept { Blocks::Deallocate(static_cast<void*>(p)); }

  template <typename U>
  friend bool operator==(const TrailingAllocator&, const TrailingAllocator<U, Blocks>&) noexcept {
    return true;  // stateless: any instance frees what another allocated
  }
};

template <typename T, typename Blocks = HeapBlocks, typename... Args>
std::shared_ptr<T> AllocateSharedWithTrailing(TrailingStorage& storage, Args&&... args) {
  // Restores the slot however allocate_shared exits (it is already empty if
  // allocate() ran).
  struct Pending {
    explicit Pending(TrailingStorage& request) noexcept { trailing_internal::pending = &request; }
    ~Pending() { trailing_internal::pending = nullptr; }
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
  } pending(storage);
  return std::allocate_shared<T>(TrailingAllocator<T, Blocks>(), std::forward<Args>(args)..., std::as_const(storage));
}

}  // namespace resound

#endif  // RESOUND_TRAILING_ALLOCATOR_H_

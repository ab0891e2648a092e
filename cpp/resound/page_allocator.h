// An allocator for the core's per-item arrays (hash-map slots, the table's
// entries, selector indexes): arrays of 128 KB and more get pages of their
// own from the OS (mmap), smaller ones come from operator new.
//
// Why not malloc for the large ones: glibc raises its mmap threshold each
// time a mapped block is freed (up to 32 MB), so a growing array soon lands
// in the heap, and every time it grows the old copy stays behind there as a
// free hole until something else happens to fit it. For a table of 50,000
// small items those holes were ~30 bytes per item of resident memory. Mapped
// arrays go back to the OS the moment they are freed, and the untouched tail
// of a vector's spare capacity costs no resident memory at all.
#ifndef RESOUND_PAGE_ALLOCATOR_H_
#define RESOUND_PAGE_ALLOCATOR_H_

#include <cstddef>
#include <limits>
#include <new>
#include <vector>

namespace resound {

// The untyped half: blocks of `bytes`, mapped at or above kMinMappedBytes.
// Deallocate must be given the size that Allocate was.
class PageBlocks {
 public:
  static constexpr size_t kMinMappedBytes = 128 * 1024;

  PageBlocks() = delete;

  static void* Allocate(size_t bytes);
  static void Deallocate(void* block, size_t bytes) noexcept;
};

template <typename T>
class PageAllocator {
  static_assert(alignof(T) <= alignof(std::max_align_t), "mmap and operator new align to max_align_t");

 public:
  using value_type = T;

  PageAllocator() noexcept = default;
  template <typename U>
  PageAllocator(const PageAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    if (n > std::numeric_limits<size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(PageBlocks::Allocate(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { PageBlocks::Deallocate(p, n * sizeof(T)); }

  template <typename U>
  friend bool operator==(const PageAllocator&, const PageAllocator<U>&) noexcept {
    return true;  // stateless: any instance frees what another allocated
  }
};

// A vector of per-item entries.
template <typename T>
using PageVector = std::vector<T, PageAllocator<T>>;

}  // namespace resound

#endif  // RESOUND_PAGE_ALLOCATOR_H_

#include "resound/page_allocator.h"

#include <sys/mman.h>

namespace resound {

void* PageBlocks::Allocate(size_t bytes) {
  if (bytes < kMinMappedBytes) return ::operator new(bytes);
  void* block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) throw std::bad_alloc();
  return block;
}

void PageBlocks::Deallocate(void* block, size_t bytes) noexcept {
  if (block == nullptr) return;
  if (bytes < kMinMappedBytes) {
    ::operator delete(block);
  } else {
    munmap(block, bytes);  // cannot fail for a range mmap returned
  }
}

}  // namespace resound

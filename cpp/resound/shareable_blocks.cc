#include "resound/shareable_blocks.h"

#include <atomic>
#include <cstring>

#include "resound/block_recycler.h"

namespace resound {

namespace {

std::atomic<PayloadBlockSource*> installed{nullptr};

}  // namespace

bool ShareableBlocks::Install(PayloadBlockSource& source) noexcept {
  // Once: a block's owner is told apart by address (Deallocate), which a
  // second source would make ambiguous for the first one's blocks.
  PayloadBlockSource* none = nullptr;
  return installed.compare_exchange_strong(none, &source, std::memory_order_acq_rel);
}

PayloadBlockSource* ShareableBlocks::Installed() noexcept { return installed.load(std::memory_order_acquire); }

void* ShareableBlocks::Allocate(size_t bytes) {
  const size_t total = bytes + kHeader;
  std::byte* block = nullptr;
  if (total >= kMinSharedBytes) {
    if (PayloadBlockSource* source = Installed()) block = static_cast<std::byte*>(source->Allocate(total));
  }
  if (block == nullptr) block = static_cast<std::byte*>(BlockRecycler::Allocate(total));
  std::memcpy(block, &total, sizeof total);
  return block + kHeader;
}

void ShareableBlocks::Deallocate(void* data) noexcept {
  std::byte* const block = static_cast<std::byte*>(data) - kHeader;
  size_t total = 0;
  std::memcpy(&total, block, sizeof total);
  // The source, once installed, stays for the process's life (Install): a
  // block it owns is one it made.
  PayloadBlockSource* const source = Installed();
  if (source != nullptr && source->Owns(block)) {
    source->Free(block, total);
  } else {
    BlockRecycler::Deallocate(block, total);
  }
}

}  // namespace resound

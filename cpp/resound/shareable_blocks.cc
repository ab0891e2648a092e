#include "resound/shareable_blocks.h"

#include <atomic>

namespace resound {

namespace {

std::atomic<PayloadBlockSource*> installed{nullptr};

}  // namespace

bool ShareableBlocks::Install(PayloadBlockSource& source) noexcept {
  // Once: a process has one arena, which every connection is told of.
  PayloadBlockSource* none = nullptr;
  return installed.compare_exchange_strong(none, &source, std::memory_order_acq_rel);
}

PayloadBlockSource* ShareableBlocks::Installed() noexcept { return installed.load(std::memory_order_acquire); }

SharedBlock SharedBlock::Allocate(size_t bytes) noexcept {
  PayloadBlockSource* const source = ShareableBlocks::Installed();
  if (source == nullptr) return {};
  void* const data = source->Allocate(bytes);
  if (data == nullptr) return {};
  return {source, data, bytes};
}

SharedBlock::SharedBlock(SharedBlock&& other) noexcept
    : source_(std::exchange(other.source_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

SharedBlock& SharedBlock::operator=(SharedBlock&& other) noexcept {
  if (this != &other) {
    Release();
    source_ = std::exchange(other.source_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

SharedBlock::~SharedBlock() { Release(); }

void SharedBlock::Release() noexcept {
  if (data_ != nullptr) source_->Free(data_, bytes_);
  data_ = nullptr;
}

}  // namespace resound

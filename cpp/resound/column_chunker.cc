#include "resound/column_chunker.h"

#include <cstring>
#include <random>
#include <string>
#include <utility>

#include "resound/errors.h"

namespace resound {
namespace {

void CheckAtLeastOne(int64_t value, const char* name) {
  if (value < 1) throw InvalidArgumentError(std::string(name) + " must be >= 1, got " + std::to_string(value));
}

}  // namespace

ColumnChunker::ColumnChunker(std::shared_ptr<ChunkStore> store, DType dtype, std::vector<int64_t> step_shape,
                             int64_t max_chunk_length, int64_t keep_alive)
    : store_(std::move(store)) {
  if (!store_) throw InvalidArgumentError("store must not be None");
  CheckAtLeastOne(max_chunk_length, "max_chunk_length");
  CheckAtLeastOne(keep_alive, "keep_alive");
  metadata_.dtype = dtype;
  metadata_.step_shape = std::move(step_shape);
  metadata_.num_steps = 1;
  row_bytes_ = static_cast<size_t>(Chunk::RawSize(metadata_));  // checks the shape and overflow
  metadata_.num_steps = max_chunk_length;
  Chunk::RawSize(metadata_);  // the whole chunk must be representable too
  max_chunk_length_ = max_chunk_length;
  keep_alive_ = keep_alive;
  // One-row chunks are built straight from the caller's row: no buffer.
  if (max_chunk_length > 1) rows_.resize(row_bytes_ * static_cast<size_t>(max_chunk_length));
  std::random_device device;
  key_state_ = (static_cast<uint64_t>(device()) << 32) ^ device();
}

uint64_t ColumnChunker::NextKeyLocked() noexcept {
  // splitmix64: a bijection of a counter, so one chunker never repeats a
  // key, and the keys of chunkers seeded differently look independent.
  uint64_t z = (key_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t ColumnChunker::Append(std::span<const std::byte> row, uint64_t episode_id, int64_t step) {
  if (row.size() != row_bytes_) {
    throw InvalidArgumentError("a row of this column has " + std::to_string(row_bytes_) + " bytes, got " +
                               std::to_string(row.size()));
  }
  std::shared_ptr<const Chunk> dropped;  // destroyed after the lock
  std::lock_guard<std::mutex> lock(mu_);
  // Checked before anything changes, so that completing the chunk cannot
  // fail its validation half-way.
  if (step < 0 || (open_rows_ > 0 && step <= metadata_.end_step)) {
    throw InvalidArgumentError("step " + std::to_string(step) + " must be >= 0 and after the open chunk's last step");
  }
  if (open_rows_ == 0) {
    metadata_.key = NextKeyLocked();
    metadata_.episode_id = episode_id;
    metadata_.start_step = step;
  }
  metadata_.end_step = step;
  const uint64_t key = metadata_.key;
  if (max_chunk_length_ > 1 && row_bytes_ > 0) {
    std::memcpy(rows_.data() + static_cast<size_t>(open_rows_) * row_bytes_, row.data(), row_bytes_);
  }
  ++open_rows_;
  ++rows_appended_;
  if (open_rows_ == max_chunk_length_) {
    try {
      // A one-row chunk is copied straight from the caller's buffer.
      CompleteLocked(max_chunk_length_ == 1 ? row
                                            : std::span<const std::byte>(rows_.data(), rows_.size()));
    } catch (...) {
      // The row is not taken (the caller sees the error): take it back.
      --open_rows_;
      --rows_appended_;
      throw;
    }
  }
  dropped = TrimOneLocked();
  return key;
}

void ColumnChunker::Finalize() {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_rows_ > 0) CompleteLocked({rows_.data(), static_cast<size_t>(open_rows_) * row_bytes_});
}

void ColumnChunker::CompleteLocked(std::span<const std::byte> rows) {
  metadata_.num_steps = open_rows_;
  metadata_.uncompressed_size = static_cast<int64_t>(rows.size());
  auto chunk = store_->Insert(metadata_, rows);
  KeepLocked({rows_appended_ - 1, std::move(chunk)});
  open_rows_ = 0;
}

void ColumnChunker::KeepLocked(Kept kept) {
  if (kept_begin_ > 0 && 2 * kept_begin_ >= kept_.size()) {
    kept_.erase(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(kept_begin_));
    kept_begin_ = 0;
  }
  kept_.push_back(std::move(kept));
}

void ColumnChunker::TrimLocked(std::vector<std::shared_ptr<const Chunk>>& dropped) {
  while (auto chunk = TrimOneLocked()) dropped.push_back(std::move(chunk));
}

std::shared_ptr<const Chunk> ColumnChunker::TrimOneLocked() noexcept {
  // Rows older than the newest keep_alive ones can no longer be referenced.
  const int64_t oldest_alive = rows_appended_ - keep_alive_;
  if (kept_begin_ == kept_.size() || kept_[kept_begin_].last_row >= oldest_alive) return nullptr;
  return std::move(kept_[kept_begin_++].chunk);
}

std::vector<std::byte> ColumnChunker::OpenRow(int64_t offset) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (offset < 0 || offset >= open_rows_) {
    throw InvalidArgumentError("row " + std::to_string(offset) + " is not in the open chunk of " +
                               std::to_string(open_rows_) + " rows");
  }
  const auto* begin = rows_.data() + static_cast<size_t>(offset) * row_bytes_;
  return {begin, begin + row_bytes_};
}

void ColumnChunker::Clear() noexcept {
  std::vector<Kept> dropped;
  std::lock_guard<std::mutex> lock(mu_);
  dropped.swap(kept_);
  kept_begin_ = 0;
  open_rows_ = 0;
  rows_appended_ = 0;
}

void ColumnChunker::SetKeepAlive(int64_t keep_alive) {
  CheckAtLeastOne(keep_alive, "keep_alive");
  std::vector<std::shared_ptr<const Chunk>> dropped;
  std::lock_guard<std::mutex> lock(mu_);
  keep_alive_ = keep_alive;
  TrimLocked(dropped);
}

void ColumnChunker::SetMaxChunkLength(int64_t max_chunk_length) {
  CheckAtLeastOne(max_chunk_length, "max_chunk_length");
  std::lock_guard<std::mutex> lock(mu_);
  if (open_rows_ > 0) {
    throw FailedPreconditionError("the chunk length cannot change while a chunk is open (" +
                                  std::to_string(open_rows_) + " rows)");
  }
  ChunkMetadata check = metadata_;
  check.num_steps = max_chunk_length;
  Chunk::RawSize(check);
  rows_.resize(max_chunk_length > 1 ? row_bytes_ * static_cast<size_t>(max_chunk_length) : 0);
  rows_.shrink_to_fit();
  max_chunk_length_ = max_chunk_length;
}

int64_t ColumnChunker::keep_alive() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return keep_alive_;
}

int64_t ColumnChunker::max_chunk_length() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return max_chunk_length_;
}

int64_t ColumnChunker::open_rows() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return open_rows_;
}

size_t ColumnChunker::num_kept() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return kept_.size() - kept_begin_;
}

}  // namespace resound

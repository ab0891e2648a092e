#include "resound/vector_writer.h"

#include <cmath>
#include <random>
#include <string>
#include <utility>

#include "resound/errors.h"

namespace resound {
namespace {

void CheckAtLeastOne(int64_t value, const char* name) {
  if (value < 1) throw InvalidArgumentError(std::string(name) + " must be >= 1, got " + std::to_string(value));
}

// num_envs, once checked: the environments are built in place (an Env is
// not copyable, and the vector never grows).
size_t CheckedCount(int64_t num_envs) {
  CheckAtLeastOne(num_envs, "num_envs");
  return static_cast<size_t>(num_envs);
}

bool Selected(std::span<const uint8_t> envs, size_t env) noexcept { return envs.empty() || envs[env] != 0; }

}  // namespace

VectorWriter::VectorWriter(std::shared_ptr<ChunkStore> store, int64_t num_envs, std::vector<ColumnFormat> columns,
                           int64_t max_sequence_length, int64_t max_chunk_length)
    : store_(std::move(store)),
      num_envs_(num_envs),
      formats_(std::move(columns)),
      max_sequence_length_(max_sequence_length),
      max_chunk_length_(max_chunk_length),
      envs_(CheckedCount(num_envs)) {
  if (!store_) throw InvalidArgumentError("store must not be None");
  CheckAtLeastOne(max_sequence_length, "max_sequence_length");
  CheckAtLeastOne(max_chunk_length, "max_chunk_length");
  if (formats_.empty()) throw InvalidArgumentError("a vector writer needs at least one column");
  // An item waits for the chunk of its newest row, which completes at most
  // max_chunk_length - 1 steps later; its oldest row's chunk must still be
  // alive then.
  const int64_t keep_alive = max_sequence_length + max_chunk_length - 1;
  ring_size_ = keep_alive;
  std::random_device device;
  key_state_ = (static_cast<uint64_t>(device()) << 32) ^ device();
  for (Env& env : envs_) {
    env.chunkers.reserve(formats_.size());
    for (const ColumnFormat& format : formats_) {
      env.chunkers.push_back(
          std::make_unique<ColumnChunker>(store_, format.dtype, format.step_shape, max_chunk_length, keep_alive));
    }
    env.ring_keys.resize(static_cast<size_t>(ring_size_) * formats_.size());
    env.ring_offsets.resize(static_cast<size_t>(ring_size_));
    StartEpisodeLocked(env);
  }
  for (const auto& chunker : envs_.front().chunkers) row_bytes_.push_back(chunker->row_bytes());
}

uint64_t VectorWriter::NextKeyLocked() noexcept {
  // splitmix64, as the chunkers draw their keys: never repeats, looks random.
  uint64_t z = (key_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void VectorWriter::StartEpisodeLocked(Env& env) noexcept {
  env.episode_id = NextKeyLocked();
  env.steps = 0;
}

VectorWriter::Written VectorWriter::Append(std::span<const std::span<const std::byte>> columns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (columns.size() != formats_.size()) {
    throw InvalidArgumentError("a step has " + std::to_string(formats_.size()) + " columns, got " +
                               std::to_string(columns.size()));
  }
  for (size_t c = 0; c < columns.size(); ++c) {
    const size_t expected = row_bytes_[c] * static_cast<size_t>(num_envs_);
    if (columns[c].size() != expected) {
      throw InvalidArgumentError("column " + std::to_string(c) + " has " + std::to_string(columns[c].size()) +
                                 " bytes, but " + std::to_string(num_envs_) + " rows of it have " +
                                 std::to_string(expected));
    }
  }
  const size_t width = formats_.size();
  for (size_t e = 0; e < envs_.size(); ++e) {
    Env& env = envs_[e];
    const size_t slot = static_cast<size_t>(env.steps % ring_size_);
    for (size_t c = 0; c < width; ++c) {
      const std::span<const std::byte> row = columns[c].subspan(e * row_bytes_[c], row_bytes_[c]);
      env.ring_keys[slot * width + c] = env.chunkers[c]->Append(row, env.episode_id, env.steps);
    }
    // The row just appended is the open chunk's last, or (if that completed
    // the chunk) the last of a full one.
    const int64_t open = env.chunkers.front()->open_rows();
    env.ring_offsets[slot] = (open == 0 ? max_chunk_length_ : open) - 1;
    ++env.steps;
  }
  // Only after every environment has its row: a refused item must not leave
  // the step half-appended.
  PrepareAllCompleteLocked();
  return InsertWithoutWaitingLocked(0);
}

void VectorWriter::TrajectoryLocked(const Env& env, int64_t length, int64_t last_step,
                                    Trajectory& trajectory) const {
  const size_t width = formats_.size();
  trajectory.resize(width);
  for (size_t c = 0; c < width; ++c) {
    std::vector<ChunkSlice>& slices = trajectory[c].slices;
    slices.clear();  // keeps its buffer for the next item
    trajectory[c].squeeze = false;
    for (int64_t step = last_step - length + 1; step <= last_step; ++step) {
      const size_t slot = static_cast<size_t>(step % ring_size_);
      const uint64_t key = env.ring_keys[slot * width + c];
      if (!slices.empty() && slices.back().chunk_key == key) {
        ++slices.back().length;
      } else {
        slices.push_back({key, env.ring_offsets[slot], 1});
      }
    }
  }
}

VectorWriter::Written VectorWriter::CreateItems(const std::shared_ptr<Table>& table, int64_t length,
                                                std::span<const double> priorities, std::span<const uint8_t> envs) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!table) throw InvalidArgumentError("table must not be None");
  if (length < 1 || length > max_sequence_length_) {
    throw InvalidArgumentError("length must be in [1, max_sequence_length=" + std::to_string(max_sequence_length_) +
                               "], got " + std::to_string(length));
  }
  if (priorities.size() != 1 && priorities.size() != envs_.size()) {
    throw InvalidArgumentError("priorities must hold one priority or one per environment (" +
                               std::to_string(num_envs_) + "), got " + std::to_string(priorities.size()));
  }
  if (!envs.empty() && envs.size() != envs_.size()) {
    throw InvalidArgumentError("envs must hold one flag per environment (" + std::to_string(num_envs_) + "), got " +
                               std::to_string(envs.size()));
  }
  for (size_t e = 0; e < envs_.size(); ++e) {
    const double priority = priorities[priorities.size() == 1 ? 0 : e];
    if (Selected(envs, e) && envs_[e].steps >= length && !std::isfinite(priority)) {
      throw InvalidArgumentError("priority of environment " + std::to_string(e) + " must be finite, got " +
                                 std::to_string(priority));
    }
  }
  int64_t created = 0;
  for (size_t e = 0; e < envs_.size(); ++e) {
    Env& env = envs_[e];
    if (!Selected(envs, e) || env.steps < length) continue;
    env.pending.push_back(
        {table, NextKeyLocked(), priorities[priorities.size() == 1 ? 0 : e], length, env.steps - 1});
    ++num_pending_;
    ++created;
  }
  // A chunk that completed with the newest row makes its items ready now.
  PrepareAllCompleteLocked();
  return InsertWithoutWaitingLocked(created);
}

void VectorWriter::PrepareCompleteLocked(Env& env) {
  // Rows before the open chunk's first are in complete chunks.
  const int64_t complete_steps = env.steps - env.chunkers.front()->open_rows();
  while (!env.pending.empty() && env.pending.front().last_step < complete_steps) {
    PendingItem item = std::move(env.pending.front());
    env.pending.pop_front();
    --num_pending_;
    if (item.last_step - item.length + 1 < env.steps - ring_size_) {
      // Its oldest rows left the ring (a table refused an item ahead of it
      // for so long): it cannot be built any more.
      throw FailedPreconditionError("an item of environment steps " + std::to_string(item.last_step - item.length + 1) +
                                    ".." + std::to_string(item.last_step) + " waited too long for its chunks");
    }
    // Preparing makes the item own its chunks, so the chunkers may drop them
    // from here on. A request the table refuses (its signature) throws here,
    // after it was taken off the queue: the other items are not held up.
    request_.key = item.key;
    request_.priority = item.priority;
    TrajectoryLocked(env, item.length, item.last_step, request_.trajectory);
    ready_.push_back({item.table, item.table->PrepareOne(request_)});
  }
}

void VectorWriter::PrepareAllCompleteLocked() {
  std::exception_ptr first_error;
  for (Env& env : envs_) {
    if (env.pending.empty()) continue;
    try {
      PrepareCompleteLocked(env);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

VectorWriter::Written VectorWriter::EndEpisodes(std::span<const uint8_t> envs) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!envs.empty() && envs.size() != envs_.size()) {
    throw InvalidArgumentError("envs must hold one flag per environment (" + std::to_string(num_envs_) + "), got " +
                               std::to_string(envs.size()));
  }
  std::exception_ptr first_error;
  for (size_t e = 0; e < envs_.size(); ++e) {
    if (!Selected(envs, e)) continue;
    Env& env = envs_[e];
    for (auto& chunker : env.chunkers) chunker->Finalize();
    // Every pending item is complete now; PrepareCompleteLocked takes each
    // off the queue even when the table refuses it.
    while (!env.pending.empty()) {
      try {
        PrepareCompleteLocked(env);
      } catch (...) {
        if (!first_error) first_error = std::current_exception();
      }
    }
    for (auto& chunker : env.chunkers) chunker->Clear();
    StartEpisodeLocked(env);
  }
  if (first_error) std::rethrow_exception(first_error);
  return InsertWithoutWaitingLocked(0);
}

void VectorWriter::CompleteChunks() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Env& env : envs_) {
    for (auto& chunker : env.chunkers) chunker->Finalize();
  }
  PrepareAllCompleteLocked();
}

int64_t VectorWriter::InsertReady(const Deadline& deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  return InsertReadyLocked(deadline);
}

VectorWriter::Written VectorWriter::InsertWithoutWaitingLocked(int64_t created) {
  if (!ready_.empty()) InsertReadyLocked(Deadline::AfterSeconds(0));
  return {created, NumQueuedLocked()};
}

int64_t VectorWriter::InsertReadyLocked(const Deadline& deadline) {
  int64_t inserted = 0;
  while (!ready_.empty()) {
    const std::shared_ptr<Table> table = ready_.front().table;
    batch_.clear();
    for (auto it = ready_.begin(); it != ready_.end() && it->table == table; ++it) {
      batch_.push_back(std::move(it->prepared));
    }
    const size_t taken = batch_.size();
    // Try without waiting first, so that a table with room costs no wait.
    InsertBatchResult result = table->InsertPrepared(batch_, 0, Deadline::AfterSeconds(0));
    if (result.error && IsDeadlineExceeded(result.error) && !deadline.has_passed()) {
      const size_t done = result.num_applied;
      result = table->InsertPrepared(batch_, done, deadline);
      result.num_applied += done;
    }
    // Put back what did not go in, in order; drop what did.
    for (size_t i = result.num_applied; i < taken; ++i) ready_[i].prepared = std::move(batch_[i]);
    ready_.erase(ready_.begin(), ready_.begin() + static_cast<std::ptrdiff_t>(result.num_applied));
    inserted += static_cast<int64_t>(result.num_applied);
    if (result.error) {
      if (IsDeadlineExceeded(result.error)) return inserted;
      // The item the table refused goes, the rest stay queued.
      ready_.pop_front();
      std::rethrow_exception(result.error);
    }
  }
  return inserted;
}

int64_t VectorWriter::num_queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return NumQueuedLocked();
}

int64_t VectorWriter::num_ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(ready_.size());
}

std::vector<int64_t> VectorWriter::episode_steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> steps;
  steps.reserve(envs_.size());
  for (const Env& env : envs_) steps.push_back(env.steps);
  return steps;
}

}  // namespace resound

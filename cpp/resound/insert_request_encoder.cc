#include "resound/insert_request_encoder.h"

#include <algorithm>
#include <utility>

#include "resound/packed_trajectories.h"
#include "resound/proto_writer.h"
#include "resound/wire_messages.h"

namespace resound {

InsertRequestEncoder::InsertRequestEncoder(std::shared_ptr<const ChunkStore> store, size_t max_in_flight_items,
                                           int64_t max_in_flight_bytes)
    : store_(std::move(store)),
      max_in_flight_items_(max_in_flight_items == 0 ? SIZE_MAX : max_in_flight_items),
      max_in_flight_bytes_(max_in_flight_bytes <= 0 ? INT64_MAX : max_in_flight_bytes) {}

void InsertRequestEncoder::Add(const std::string& table, uint64_t key, double priority, Trajectory trajectory) {
  Pending pending;
  for (const TrajectoryColumn& column : trajectory) {
    for (const ChunkSlice& slice : column.slices) {
      const bool seen = std::any_of(pending.chunks.begin(), pending.chunks.end(),
                                    [&](const auto& chunk) { return chunk->key() == slice.chunk_key; });
      if (seen) continue;
      pending.chunks.push_back(store_->Get(slice.chunk_key));  // NotFoundError: nothing queued
      pending.bytes += static_cast<int64_t>(pending.chunks.back()->data_size());
    }
  }
  auto [entry, added] = table_index_.try_emplace(table, static_cast<uint32_t>(tables_.size()));
  if (added) tables_.push_back(table);
  pending.table = entry->second;
  pending.key = key;
  pending.priority = priority;
  pending.trajectory = std::move(trajectory);
  in_flight_bytes_ += pending.bytes;
  queued_bytes_ += pending.bytes;
  if (queue_.empty() && due_age_.count() > 0) oldest_queued_at_ = std::chrono::steady_clock::now();
  queue_.push_back(std::move(pending));
}

void InsertRequestEncoder::SetMessageDue(size_t items, int64_t bytes, std::chrono::nanoseconds age) noexcept {
  due_items_ = items;
  due_bytes_ = bytes;
  due_age_ = age;
  oldest_queued_at_ = std::chrono::steady_clock::now();
}

bool InsertRequestEncoder::MessageDue() const noexcept {
  if (queue_.empty()) return false;
  if (due_items_ > 0 && queue_.size() >= due_items_) return true;
  if (due_bytes_ > 0 && queued_bytes_ >= due_bytes_) return true;
  return due_age_.count() > 0 && std::chrono::steady_clock::now() - oldest_queued_at_ >= due_age_;
}

std::vector<std::shared_ptr<const Chunk>> InsertRequestEncoder::TakeMessage(
    size_t max_items, size_t max_bytes, const std::function<char*(size_t)>& allocate, bool data_tail,
    const PayloadBlockSource* arena) {
  // Sized for the items it will likely take (the whole queue, up to
  // max_items): a message of one or two items, a writer flushing after
  // each, spent ~3 us in some 60 allocations as these grew one by one.
  const size_t limit = std::max<size_t>(max_items, 1);
  const size_t expected = std::min(queue_.size(), limit);
  std::vector<const Chunk*> new_chunks;
  new_chunks.reserve(expected);
  std::vector<std::shared_ptr<const Chunk>> new_handles;
  if (arena != nullptr) new_handles.reserve(expected);
  size_t new_bytes = 0;
  PackedTrajectories packed;
  packed.Reserve(expected, expected);
  std::vector<uint32_t> table_indices;
  std::vector<uint64_t> keys;
  std::vector<double> priorities;
  table_indices.reserve(expected);
  keys.reserve(expected);
  priorities.reserve(expected);
  while (!queue_.empty() && keys.size() < limit) {
    Pending& pending = queue_.front();
    size_t item_bytes = 0;
    for (const auto& chunk : pending.chunks) {
      if (!sent_.count(chunk->key())) item_bytes += chunk->data_size();
    }
    if (!keys.empty() && new_bytes + item_bytes > max_bytes) break;
    for (const auto& chunk : pending.chunks) {
      if (sent_.insert(chunk->key()).second) {
        new_chunks.push_back(chunk.get());
        if (arena != nullptr) new_handles.push_back(chunk);
      }
    }
    new_bytes += item_bytes;
    packed.Append(pending.trajectory);
    table_indices.push_back(pending.table);
    keys.push_back(pending.key);
    priorities.push_back(pending.priority);
    queued_bytes_ -= pending.bytes;
    unconfirmed_.push_back(std::move(pending));
    queue_.pop_front();
  }
  // (The items a full message left wait from now on, near enough.)
  if (!queue_.empty() && due_age_.count() > 0) oldest_queued_at_ = std::chrono::steady_clock::now();
  // A chunk gone from the store has no handle left anywhere: no item on its
  // way and no writer can use it again, so the server may let it go.
  std::vector<uint64_t> released;
  for (const uint64_t key : sent_) {
    if (!store_->Find(key)) released.push_back(key);
  }
  for (const uint64_t key : released) sent_.erase(key);

  // About the bytes each part takes (tags, varint keys, priorities): one
  // allocation each instead of doubling from empty.
  ProtoWriter message;
  message.Reserve(64 + 64 * new_chunks.size() + 64 * keys.size() + 10 * released.size());
  if (!new_chunks.empty()) wire::WriteChunkBatch(message, wire::insert_request::kChunks, new_chunks);
  if (!keys.empty()) {
    ProtoWriter items;
    items.Reserve(64 + 64 * keys.size());
    for (const std::string& name : tables_) items.BytesField(wire::item_batch::kTables, name);
    items.PackedVarints(wire::item_batch::kTableIndices, table_indices);
    items.PackedVarints(wire::item_batch::kKeys, keys);
    items.PackedDoubles(wire::item_batch::kPriorities, priorities);
    wire::WriteTrajectories(items, wire::item_batch::kTrajectories, packed);
    message.MessageField(wire::insert_request::kItems, items);
  }
  message.PackedVarints(wire::insert_request::kReleaseChunkKeys, released);
  if (!data_tail) {
    wire::WriteWithPayloads(message, wire::insert_request::kChunkData, new_chunks, allocate);
    return {};
  }
  // The handles of the chunks it named in the arena (new_handles is
  // new_chunks' twin whenever there is an arena).
  std::vector<std::shared_ptr<const Chunk>> named;
  for (const size_t i : wire::WriteWithDataTail(message, new_chunks, allocate, arena)) {
    named.push_back(std::move(new_handles[i]));
  }
  return named;
}

bool InsertRequestEncoder::HasReleasable() const {
  return std::any_of(sent_.begin(), sent_.end(), [this](uint64_t key) { return !store_->Find(key); });
}

size_t InsertRequestEncoder::Confirm(std::span<const uint64_t> keys) {
  size_t dropped = 0;
  for (const uint64_t key : keys) {
    if (unconfirmed_.empty() || unconfirmed_.front().key != key) continue;
    in_flight_bytes_ -= unconfirmed_.front().bytes;
    unconfirmed_.pop_front();
    ++dropped;
  }
  return dropped;
}

void InsertRequestEncoder::Requeue() {
  for (auto it = unconfirmed_.rbegin(); it != unconfirmed_.rend(); ++it) {
    queued_bytes_ += it->bytes;
    queue_.push_front(std::move(*it));
  }
  oldest_queued_at_ = std::chrono::steady_clock::now();
  unconfirmed_.clear();
  sent_.clear();
}

}  // namespace resound

#include "resound/table.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>

#include "resound/errors.h"

namespace resound {
namespace {

int64_t NowNanos() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void TableConfig::Validate() const {
  if (name.empty()) throw InvalidArgumentError("name must be a non-empty string");
  if (max_size < 1) {
    throw InvalidArgumentError("max_size must be a positive integer, got " + std::to_string(max_size));
  }
  rate_limiter.Validate();
  // Building throwaway selectors validates their options (e.g. the exponent).
  MakeSelector(sampler);
  MakeSelector(remover);
}

Table::Table(TableConfig config, std::shared_ptr<ChunkStore> store)
    : config_((config.Validate(), std::move(config))),
      store_(store ? std::move(store) : std::make_shared<ChunkStore>()),
      sampler_(MakeSelector(config_.sampler)),
      remover_(MakeSelector(config_.remover)),
      limiter_(config_.rate_limiter) {}

Table::~Table() { Close(); }

void Table::ValidatePriority(double priority) const {
  // Both selectors must accept the priority before anything changes.
  sampler_->ValidatePriority(priority);
  remover_->ValidatePriority(priority);
}

std::shared_ptr<const Item> Table::Build(ItemRequest& request) const {
  ValidatePriority(request.priority);
  auto item = Item::Create(request.key, std::move(request.trajectory), *store_);
  if (!config_.column_specs.empty()) ColumnSpec::Check(config_.column_specs, *item);
  return item;
}

void Table::AddReferences(const Item& item) {
  for (const auto& chunk : item.chunks()) {
    if (++*chunk_refs_.TryEmplace(chunk->key(), 0).first == 1) chunk_memory_bytes_ += chunk->memory_bytes();
    ++*episode_refs_.TryEmplace(chunk->episode_id(), 0).first;
  }
}

void Table::RemoveReferences(const Item& item) {
  for (const auto& chunk : item.chunks()) {
    if (--*chunk_refs_.Find(chunk->key()) == 0) {
      chunk_refs_.Erase(chunk->key());
      chunk_memory_bytes_ -= chunk->memory_bytes();
    }
    if (--*episode_refs_.Find(chunk->episode_id()) == 0) {
      episode_refs_.Erase(chunk->episode_id());
      ++num_deleted_episodes_;
    }
  }
}

void Table::InsertLocked(std::shared_ptr<const Item> item, double priority, Released& released) {
  const uint64_t key = item->key();
  if (Entry* existing = items_.Find(key)) {
    // A known key only changes priority; the new copy of the data is dropped
    // (after the lock is released) and the limiter counts no insert.
    UpdateLocked(key, *existing, priority);
    released.push_back(std::move(item));
    return;
  }
  sampler_->Insert(key, priority);
  try {
    remover_->Insert(key, priority);
  } catch (...) {
    sampler_->Delete(key);  // keep both selectors holding the same keys
    throw;
  }
  AddReferences(*item);
  items_.TryEmplace(key, Entry{std::move(item), priority, 0, NowNanos(), next_sequence_++});
  limiter_.RecordInsert();
  if (static_cast<int64_t>(items_.size()) > config_.max_size) {
    // The remover sees the new item too, so it may be the one evicted.
    DeleteLocked(remover_->Sample().key, released);
  }
}

void Table::UpdateLocked(uint64_t key, Entry& entry, double priority) {
  sampler_->Update(key, priority);
  remover_->Update(key, priority);
  entry.priority = priority;
}

void Table::CountSample(Entry& entry) noexcept {
  if (entry.times_sampled == 0) ++num_unique_samples_;
  // Saturate rather than overflow: with no max_times_sampled a small table
  // can sample one item billions of times in a long run.
  if (entry.times_sampled < std::numeric_limits<int32_t>::max()) ++entry.times_sampled;
}

void Table::DeleteLocked(uint64_t key, Released& released) {
  Entry* entry = items_.Find(key);
  if (entry == nullptr) return;
  RemoveReferences(*entry->item);
  released.push_back(std::move(entry->item));
  items_.Erase(key);
  sampler_->Delete(key);
  remover_->Delete(key);
  limiter_.RecordDelete();
}

void Table::Insert(ItemRequest request, const Deadline& deadline) {
  auto item = Build(request);
  Released released;  // destroyed after the lock below is released
  std::unique_lock<std::mutex> lock(mu_);
  limiter_.AwaitCanInsert(lock, deadline);
  InsertLocked(std::move(item), request.priority, released);
}

InsertBatchResult Table::InsertBatch(std::vector<ItemRequest> requests, const Deadline& deadline) {
  std::vector<std::shared_ptr<const Item>> items;
  items.reserve(requests.size());
  for (auto& request : requests) items.push_back(Build(request));

  InsertBatchResult result;
  Released released;
  released.reserve(requests.size());
  std::unique_lock<std::mutex> lock(mu_);
  for (size_t i = 0; i < items.size(); ++i) {
    try {
      limiter_.AwaitCanInsert(lock, deadline);
    } catch (...) {
      result.error = std::current_exception();
      break;
    }
    InsertLocked(std::move(items[i]), requests[i].priority, released);
    result.num_applied = i + 1;
  }
  return result;
}

std::vector<SampledItem> Table::Sample(int64_t max_samples, const Deadline& deadline) {
  if (max_samples < 1) {
    throw InvalidArgumentError("num_samples must be >= 1, got " + std::to_string(max_samples));
  }
  // A flexible batch may return fewer samples than asked, so a huge request
  // is served in passes of bounded size instead of one unbounded allocation.
  max_samples = std::min(max_samples, kMaxSamplesPerCall);
  std::vector<SampledItem> samples;
  Released released;
  std::unique_lock<std::mutex> lock(mu_);
  const bool waited = limiter_.AwaitCanSample(lock, deadline);
  if (config_.max_times_sampled > 0) {
    // Samples may delete items, so each one must see the previous one's
    // effects: take them one at a time.
    do {
      const Selection selection = sampler_->Sample();
      Entry& entry = *items_.Find(selection.key);
      CountSample(entry);
      samples.push_back({entry.item, entry.priority, entry.times_sampled, selection.probability,
                         static_cast<int64_t>(items_.size()), entry.inserted_at_ns, waited});
      limiter_.RecordSample();
      if (entry.times_sampled >= config_.max_times_sampled) DeleteLocked(selection.key, released);
    } while (static_cast<int64_t>(samples.size()) < max_samples && limiter_.CanSample(1));
    return samples;
  }
  // Nothing is deleted, so the limiter's answer for the whole batch is known
  // up front (CanSample(k) equals committing k samples one by one), and the
  // batch can be taken in passes that keep many cache misses in flight: the
  // first pass only reads (selector, item index), the second prefetches the
  // items, the third takes the references (atomic increments, which would
  // otherwise serialise the misses).
  int64_t count = 1;
  while (count < max_samples && limiter_.CanSample(count + 1)) ++count;
  samples.resize(static_cast<size_t>(count));
  std::vector<const Entry*> entries(static_cast<size_t>(count));
  std::vector<Selection> selections(static_cast<size_t>(count));
  sampler_->SampleMany(selections.size(), selections.data());
  for (const Selection& selection : selections) items_.Prefetch(selection.key);
  const auto table_size = static_cast<int64_t>(items_.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const Selection& selection = selections[i];
    Entry& entry = *items_.Find(selection.key);
    CountSample(entry);
    entries[i] = &entry;
    samples[i] = {nullptr, entry.priority, entry.times_sampled, selection.probability, table_size,
                  entry.inserted_at_ns, waited};
  }
  for (const Entry* entry : entries) __builtin_prefetch(entry->item.get());
  for (size_t i = 0; i < samples.size(); ++i) samples[i].item = entries[i]->item;
  limiter_.RecordSamples(count);
  return samples;
}

MutateResult Table::MutatePriorities(const std::vector<std::pair<uint64_t, double>>& updates,
                                     const std::vector<uint64_t>& deletes) {
  for (const auto& [key, priority] : updates) {
    try {
      ValidatePriority(priority);
    } catch (const InvalidArgumentError& error) {
      throw InvalidArgumentError("updates: key " + std::to_string(key) + ": " + error.what());
    }
  }
  MutateResult result;
  Released released;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, priority] : updates) {
    Entry* entry = items_.Find(key);
    if (entry == nullptr) continue;
    UpdateLocked(key, *entry, priority);
    ++result.num_updated;
  }
  for (const uint64_t key : deletes) {
    if (!items_.Contains(key)) continue;
    DeleteLocked(key, released);
    ++result.num_deleted;
  }
  return result;
}

void Table::Reset() {
  KeyMap<Entry> dropped;  // freed after the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  std::swap(dropped, items_);
  sampler_->Clear();
  remover_->Clear();
  episode_refs_.Clear();
  chunk_refs_.Clear();
  chunk_memory_bytes_ = 0;
  num_deleted_episodes_ = 0;
  num_unique_samples_ = 0;
  limiter_.ResetCounters();
}

void Table::Close() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  limiter_.Cancel();
}

bool Table::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

bool Table::CanInsert(int64_t n) const {
  std::lock_guard<std::mutex> lock(mu_);
  return limiter_.CanInsert(n);
}

bool Table::CanSample(int64_t n) const {
  std::lock_guard<std::mutex> lock(mu_);
  return limiter_.CanSample(n);
}

int64_t Table::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(items_.size());
}

TableInfo Table::Info() const {
  TableInfo info;
  info.name = config_.name;
  info.sampler = config_.sampler;
  info.remover = config_.remover;
  info.max_size = config_.max_size;
  info.max_times_sampled = config_.max_times_sampled;
  info.signature = config_.signature;
  std::lock_guard<std::mutex> lock(mu_);
  info.current_size = static_cast<int64_t>(items_.size());
  info.num_episodes = static_cast<int64_t>(episode_refs_.size());
  info.num_deleted_episodes = num_deleted_episodes_;
  info.num_unique_samples = num_unique_samples_;
  info.num_chunks = static_cast<int64_t>(chunk_refs_.size());
  info.memory_bytes = chunk_memory_bytes_;
  info.rate_limiter = limiter_.Info();
  info.closed = closed_;
  return info;
}

std::vector<ItemSnapshot> Table::Snapshot() const {
  std::vector<std::pair<uint64_t, ItemSnapshot>> ordered;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ordered.reserve(items_.size());
    items_.ForEach([&](uint64_t, const Entry& entry) {
      ordered.push_back({entry.sequence, {entry.item, entry.priority, entry.times_sampled, entry.inserted_at_ns}});
    });
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ItemSnapshot> snapshot;
  snapshot.reserve(ordered.size());
  for (auto& [sequence, item] : ordered) snapshot.push_back(std::move(item));
  return snapshot;
}

}  // namespace resound

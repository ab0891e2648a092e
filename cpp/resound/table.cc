#include "resound/table.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <unordered_set>

#include "resound/errors.h"

namespace resound {
namespace {

int64_t NowNanos() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Adds the time from its making to its end to `total`: an insert's or a
// sample's work under the table's lock (TableInfo::worker_time).
class WorkTimer {
 public:
  explicit WorkTimer(std::chrono::nanoseconds& total) noexcept
      : total_(total), start_(std::chrono::steady_clock::now()) {}
  WorkTimer(const WorkTimer&) = delete;
  WorkTimer& operator=(const WorkTimer&) = delete;
  ~WorkTimer() { total_ += std::chrono::steady_clock::now() - start_; }

 private:
  std::chrono::nanoseconds& total_;
  const std::chrono::steady_clock::time_point start_;
};

int64_t Milliseconds(std::chrono::nanoseconds time) noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(time).count();
}

}  // namespace

void TableConfig::Validate() const {
  if (name.empty()) throw InvalidArgumentError("name must be a non-empty string");
  if (max_size < 1) {
    throw InvalidArgumentError("max_size must be a positive integer, got " + std::to_string(max_size));
  }
  if (max_bytes < 0) {
    throw InvalidArgumentError("max_bytes must be >= 0 (0: no limit), got " + std::to_string(max_bytes));
  }
  rate_limiter.Validate();
  // Building throwaway selectors validates their options (e.g. the exponent).
  MakeSlotSelector(sampler);
  MakeSlotSelector(remover);
}

Table::Table(TableConfig config, std::shared_ptr<ChunkStore> store)
    : config_((config.Validate(), std::move(config))),
      store_(store ? std::move(store) : std::make_shared<ChunkStore>()),
      sampler_(MakeSlotSelector(config_.sampler)),
      remover_(MakeSlotSelector(config_.remover)),
      limiter_(config_.rate_limiter, config_.name) {}

Table::~Table() { Close(); }

void Table::ValidatePriority(double priority) const {
  // Both selectors must accept the priority before anything changes.
  sampler_->ValidatePriority(priority);
  remover_->ValidatePriority(priority);
}

std::shared_ptr<const Item> Table::Build(ItemRequest& request) const {
  ValidatePriority(request.priority);
  auto item = Item::Create(request.key, request.trajectory, *store_);
  if (!config_.column_specs.empty()) ColumnSpec::Check(config_.column_specs, *item, config_.name);
  if (config_.max_bytes > 0) {
    // Eviction could never make room for it (its chunks are distinct).
    int64_t bytes = 0;
    for (const auto& chunk : item->chunks()) bytes += chunk->memory_bytes();
    if (bytes > config_.max_bytes) {
      throw InvalidArgumentError("item " + std::to_string(request.key) + " holds " + std::to_string(bytes) +
                                 " bytes of chunks, more than the max_bytes " + std::to_string(config_.max_bytes) +
                                 " of table '" + config_.name + "'");
    }
  }
  return item;
}

void Table::AddReferences(const Item& item) {
  for (const auto& chunk : item.chunks()) {
    const auto [count, new_chunk] = chunk_refs_.TryEmplace(chunk->key(), 1);
    if (!new_chunk) {
      ++*count;
      continue;
    }
    chunk_memory_bytes_ += chunk->memory_bytes();
    // An episode is referenced while any of its chunks is, so it is enough
    // to count its chunks as they come and go.
    const auto [chunks, new_episode] = episode_refs_.TryEmplace(chunk->episode_id(), 1);
    if (!new_episode) ++*chunks;
  }
}

void Table::RemoveReferences(const Item& item) {
  // Zero marks a free slot in these maps, so a key is erased instead of
  // being counted down to zero.
  for (const auto& chunk : item.chunks()) {
    uint32_t* count = chunk_refs_.Find(chunk->key());
    if (*count > 1) {
      --*count;
      continue;
    }
    chunk_refs_.Erase(chunk->key());
    chunk_memory_bytes_ -= chunk->memory_bytes();
    uint64_t* chunks = episode_refs_.Find(chunk->episode_id());
    if (*chunks > 1) {
      --*chunks;
    } else {
      episode_refs_.Erase(chunk->episode_id());
      ++num_deleted_episodes_;
    }
  }
}

void Table::InsertLocked(std::shared_ptr<const Item> item, double priority, Released& released) {
  const uint64_t key = item->key();
  ++num_changes_;
  if (const uint32_t* slot = slots_.Find(key)) {
    // A known key only changes priority; the new copy of the data is dropped
    // (after the lock is released) and the limiter counts no insert.
    UpdateLocked(*slot, priority);
    released.push_back(std::move(item));
    return;
  }
  // Each step either succeeds or throws with nothing changed (allocation, or
  // a table at the selectors' limit of slots); undo the earlier steps if a
  // later one throws, so the table stays consistent.
  const size_t slot = entries_.size();
  sampler_->Append(priority);
  try {
    remover_->Append(priority);
    try {
      slots_.TryEmplace(key, static_cast<uint32_t>(slot));
      try {
        // emplace_back takes `item` only once its allocation has succeeded.
        entries_.emplace_back(std::move(item), priority, NowNanos(), next_sequence_, 0);
      } catch (...) {
        slots_.Erase(key);
        throw;
      }
    } catch (...) {
      remover_->Remove(slot);
      throw;
    }
  } catch (...) {
    sampler_->Remove(slot);
    throw;
  }
  ++next_sequence_;
  AddReferences(*entries_.back().item);
  limiter_.RecordInsert();
  if (entries_.size() > static_cast<size_t>(config_.max_size)) {
    // The remover sees the new item too, so it may be the one evicted.
    DeleteLocked(remover_->Sample().slot, released);
  }
  // One item alone fits (Build checked it), so this ends.
  while (config_.max_bytes > 0 && chunk_memory_bytes_ > config_.max_bytes && entries_.size() > 1) {
    DeleteLocked(remover_->Sample().slot, released);
  }
}

void Table::UpdateLocked(size_t slot, double priority) {
  ++num_changes_;
  sampler_->Update(slot, priority);
  remover_->Update(slot, priority);
  entries_[slot].priority = priority;
}

void Table::CountSample(Entry& entry) noexcept {
  ++num_changes_;
  if (entry.times_sampled == 0) ++num_unique_samples_;
  // Saturate rather than overflow: with no max_times_sampled a small table
  // can sample one item billions of times in a long run.
  if (entry.times_sampled < std::numeric_limits<int32_t>::max()) ++entry.times_sampled;
}

void Table::DeleteLocked(size_t slot, Released& released) {
  Entry& entry = entries_[slot];
  const uint64_t key = entry.item->key();
  ++num_changes_;
  RemoveReferences(*entry.item);
  released.push_back(std::move(entry.item));
  sampler_->Remove(slot);
  remover_->Remove(slot);
  // Fill the hole with the last entry, as the selectors just did.
  const size_t last = entries_.size() - 1;
  if (slot != last) {
    entry = std::move(entries_[last]);
    *slots_.Find(entry.item->key()) = static_cast<uint32_t>(slot);
  }
  entries_.pop_back();
  slots_.Erase(key);
  limiter_.RecordDelete();
}

void Table::Insert(ItemRequest request, const Deadline& deadline) {
  auto item = Build(request);
  Released released;  // destroyed after the lock below is released
  std::unique_lock<std::mutex> lock(mu_);
  limiter_.AwaitCanInsert(lock, deadline);
  const WorkTimer timer(inserting_);
  InsertLocked(std::move(item), request.priority, released);
}

InsertBatchResult Table::InsertBatch(std::vector<ItemRequest> requests, const Deadline& deadline) {
  std::vector<PreparedInsert> prepared = Prepare(std::move(requests));
  return InsertPrepared(prepared, 0, deadline);
}

std::vector<Table::PreparedInsert> Table::Prepare(std::vector<ItemRequest> requests) const {
  std::vector<PreparedInsert> prepared;
  prepared.reserve(requests.size());
  for (auto& request : requests) {
    const double priority = request.priority;
    prepared.push_back({Build(request), priority});
  }
  return prepared;
}

Table::PreparedInsert Table::PrepareOne(ItemRequest& request) const {
  const double priority = request.priority;
  return {Build(request), priority};
}

InsertBatchResult Table::InsertPrepared(std::vector<PreparedInsert>& prepared, size_t begin,
                                        const Deadline& deadline) {
  InsertBatchResult result;
  Released released;
  released.reserve(prepared.size() - std::min(begin, prepared.size()));
  std::unique_lock<std::mutex> lock(mu_);
  for (size_t i = begin; i < prepared.size(); ++i) {
    try {
      limiter_.AwaitCanInsert(lock, deadline);
    } catch (...) {
      result.error = std::current_exception();
      break;
    }
    const WorkTimer timer(inserting_);
    InsertLocked(std::move(prepared[i].item), prepared[i].priority, released);
    result.num_applied = i + 1 - begin;
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
  const WorkTimer timer(sampling_);
  if (config_.max_times_sampled > 0) {
    // Samples may delete items, so each one must see the previous one's
    // effects: take them one at a time.
    do {
      const SlotSelection selection = sampler_->Sample();
      Entry& entry = entries_[selection.slot];
      CountSample(entry);
      samples.push_back({entry.item, entry.priority, entry.times_sampled, selection.probability,
                         static_cast<int64_t>(entries_.size()), entry.inserted_at_ns, waited});
      limiter_.RecordSample();
      if (entry.times_sampled >= config_.max_times_sampled) DeleteLocked(selection.slot, released);
    } while (static_cast<int64_t>(samples.size()) < max_samples && limiter_.CanSample(1));
    return samples;
  }
  // Nothing is deleted, so the limiter's answer for the whole batch is known
  // up front (CanSample(k) equals committing k samples one by one), and the
  // batch can be taken in passes that keep many cache misses in flight: the
  // first pass only reads (selector, entries), the second prefetches the
  // items, the third takes the references (atomic increments, which would
  // otherwise serialise the misses).
  int64_t count = 1;
  while (count < max_samples && limiter_.CanSample(count + 1)) ++count;
  samples.resize(static_cast<size_t>(count));
  std::vector<const Entry*> entries(static_cast<size_t>(count));
  std::vector<SlotSelection> selections(static_cast<size_t>(count));
  sampler_->SampleMany(selections.size(), selections.data());
  for (const SlotSelection& selection : selections) __builtin_prefetch(&entries_[selection.slot]);
  const auto table_size = static_cast<int64_t>(entries_.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const SlotSelection& selection = selections[i];
    Entry& entry = entries_[selection.slot];
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
    const uint32_t* slot = slots_.Find(key);
    if (slot == nullptr) continue;
    UpdateLocked(*slot, priority);
    ++result.num_updated;
  }
  for (const uint64_t key : deletes) {
    const uint32_t* slot = slots_.Find(key);
    if (slot == nullptr) continue;
    DeleteLocked(*slot, released);
    ++result.num_deleted;
  }
  num_priority_updates_ += result.num_updated;
  num_mutate_deletes_ += result.num_deleted;
  return result;
}

void Table::Reset() {
  PageVector<Entry> dropped;  // freed after the lock is released
  std::lock_guard<std::mutex> lock(mu_);
  std::swap(dropped, entries_);
  slots_.Clear();
  sampler_->Clear();
  remover_->Clear();
  episode_refs_.Clear();
  chunk_refs_.Clear();
  chunk_memory_bytes_ = 0;
  num_deleted_episodes_ = 0;
  num_unique_samples_ = 0;
  limiter_.ResetCounters();
  ++num_changes_;
}

void Table::Close() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  limiter_.Cancel();
}

bool Table::ArmWake(uint32_t side) {
  if (side != WakeSignal::kInserts && side != WakeSignal::kSamples) {
    throw InvalidArgumentError("side must be WakeSignal::kInserts (1) or kSamples (2), got " + std::to_string(side));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!wake_) wake_ = std::make_unique<WakeSignal>();
  return limiter_.ArmWake(*wake_, side);
}

int Table::wake_fd() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!wake_) wake_ = std::make_unique<WakeSignal>();
  return wake_->fd();
}

void Table::NoteExternalWait(uint32_t side, int waiting) {
  if (side != WakeSignal::kInserts && side != WakeSignal::kSamples) {
    throw InvalidArgumentError("side must be WakeSignal::kInserts (1) or kSamples (2), got " + std::to_string(side));
  }
  std::lock_guard<std::mutex> lock(mu_);
  limiter_.NoteExternalWait(side, waiting);
}

std::string Table::WhyBlocked(bool insert) const {
  std::lock_guard<std::mutex> lock(mu_);
  return limiter_.WhyBlocked(insert);
}

uint32_t Table::TakeWakes() {
  WakeSignal* wake = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake = wake_.get();
  }
  // Made once and never replaced, so it outlives the lock.
  return wake == nullptr ? 0 : wake->Take();
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
  return static_cast<int64_t>(entries_.size());
}

TableInfo Table::Info() const {
  TableInfo info;
  info.name = config_.name;
  info.sampler = config_.sampler;
  info.remover = config_.remover;
  info.max_size = config_.max_size;
  info.max_bytes = config_.max_bytes;
  info.max_times_sampled = config_.max_times_sampled;
  info.signature = config_.signature;
  std::lock_guard<std::mutex> lock(mu_);
  info.current_size = static_cast<int64_t>(entries_.size());
  info.num_episodes = static_cast<int64_t>(episode_refs_.size());
  info.num_deleted_episodes = num_deleted_episodes_;
  info.num_unique_samples = num_unique_samples_;
  info.num_chunks = static_cast<int64_t>(chunk_refs_.size());
  info.memory_bytes = chunk_memory_bytes_;
  info.num_priority_updates = num_priority_updates_;
  info.num_mutate_deletes = num_mutate_deletes_;
  info.rate_limiter = limiter_.Info();
  TableWorkerTime& time = info.worker_time;
  time.running_ms = Milliseconds(std::chrono::steady_clock::now() - created_at_);
  time.sampling_ms = Milliseconds(sampling_);
  time.inserting_ms = Milliseconds(inserting_);
  time.sleeping_ms = std::max<int64_t>(0, time.running_ms - time.sampling_ms - time.inserting_ms);
  time.waiting_for_sampling_ms = static_cast<int64_t>(info.rate_limiter.blocked_insert_seconds * 1000.0);
  time.waiting_for_inserts_ms = static_cast<int64_t>(info.rate_limiter.blocked_sample_seconds * 1000.0);
  info.closed = closed_;
  info.num_changes = num_changes_;
  return info;
}

PriorityHistogram Table::HistogramOfPriorities(int32_t bins) const {
  if (bins < 1 || bins > kMaxHistogramBins) {
    throw InvalidArgumentError("bins must be an integer in [1, " + std::to_string(kMaxHistogramBins) + "], got " +
                               std::to_string(bins));
  }
  // The table's entries are the one place every item's raw priority sits
  // (selectors keep weights, ranks or nothing). Under the lock the
  // priorities are only copied, in one sequential pass that also finds the
  // range; the binning runs after the lock is released. The buffer is
  // allocated before the lock, with room for what arrives meanwhile.
  std::vector<double> priorities;
  priorities.reserve(static_cast<size_t>(size()) + 1024);
  PriorityHistogram histogram;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.empty()) return histogram;
    double low = entries_.front().priority;
    double high = low;
    for (const Entry& entry : entries_) {
      priorities.push_back(entry.priority);
      low = std::min(low, entry.priority);
      high = std::max(high, entry.priority);
    }
    histogram.min = low;
    histogram.max = high;
  }
  if (histogram.min == histogram.max) {
    histogram.counts.assign(1, static_cast<int64_t>(priorities.size()));
    return histogram;
  }
  histogram.counts.assign(static_cast<size_t>(bins), 0);
  // Halved so that max - min cannot overflow for priorities of opposite
  // signs near the limits of a double.
  const double half_low = histogram.min / 2;
  const double scale = bins / (histogram.max / 2 - half_low);
  const double last = bins - 1;
  for (const double priority : priorities) {
    // Clamped as a double before the conversion: max lands at `bins`, and a
    // range of denormals can make `scale` infinite (and a position NaN).
    double position = (priority / 2 - half_low) * scale;
    position = position >= 0 ? std::min(position, last) : 0;
    ++histogram.counts[static_cast<size_t>(position)];
  }
  return histogram;
}

std::vector<ItemSnapshot> Table::Snapshot() const {
  std::vector<std::pair<uint64_t, ItemSnapshot>> ordered;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ordered.reserve(entries_.size());
    for (const Entry& entry : entries_) {
      ordered.push_back({entry.sequence, {entry.item, entry.priority, entry.times_sampled, entry.inserted_at_ns}});
    }
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ItemSnapshot> snapshot;
  snapshot.reserve(ordered.size());
  for (auto& [sequence, item] : ordered) snapshot.push_back(std::move(item));
  return snapshot;
}

TableState Table::Checkpoint() const {
  TableState state;
  std::vector<uint64_t> sequences;
  // Allocated before the lock (fresh memory page-faults: ~10 ms for a
  // million items), with room for what arrives meanwhile.
  const size_t expected = static_cast<size_t>(size()) + 1024;
  state.entries.reserve(expected);
  sequences.reserve(expected);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Each reference taken increments a count in the item's own block, a
    // cache miss per item (~150 ns: 40 ms of lock for 268k items). Fetching
    // the blocks a few items ahead overlaps the misses.
    constexpr size_t kAhead = 16;
    const size_t count = entries_.size();
    for (size_t slot = 0; slot < count; ++slot) {
      if (slot + kAhead < count) {
        // The reference count sits just before the item in its block.
        __builtin_prefetch(reinterpret_cast<const char*>(entries_[slot + kAhead].item.get()) - 16, 1);
      }
      const Entry& entry = entries_[slot];
      state.entries.push_back({entry.item, entry.priority, entry.times_sampled, entry.inserted_at_ns,
                               sampler_->TieOrder(slot), remover_->TieOrder(slot)});
      sequences.push_back(entry.sequence);
    }
    state.counters = limiter_.Info().counters;
    state.num_deleted_episodes = num_deleted_episodes_;
    state.num_unique_samples = num_unique_samples_;
  }
  // Insertion order, outside the lock.
  std::vector<size_t> order(state.entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sequences[a] < sequences[b]; });
  std::vector<TableState::Entry> sorted;
  sorted.reserve(order.size());
  for (const size_t i : order) sorted.push_back(std::move(state.entries[i]));
  state.entries = std::move(sorted);
  return state;
}

void Table::Restore(TableState state) {
  const std::string where = "restoring table '" + config_.name + "': ";
  if (state.entries.size() > static_cast<size_t>(config_.max_size)) {
    throw InvalidArgumentError(where + std::to_string(state.entries.size()) + " items do not fit max_size " +
                               std::to_string(config_.max_size));
  }
  {
    KeyMap<uint32_t> keys;
    for (const auto& entry : state.entries) {
      if (!entry.item) throw InvalidArgumentError(where + "an entry has no item");
      ValidatePriority(entry.priority);
      if (entry.times_sampled < 0) throw InvalidArgumentError(where + "times_sampled must be >= 0");
      if (!keys.TryEmplace(entry.item->key(), 0).second) {
        throw InvalidArgumentError(where + "item key " + std::to_string(entry.item->key()) + " appears twice");
      }
      if (!config_.column_specs.empty()) ColumnSpec::Check(config_.column_specs, *entry.item, config_.name);
    }
  }
  if (config_.max_bytes > 0) {
    // Inserting past max_bytes would evict while restoring (and the selectors'
    // replay below relies on every item staying in its slot): refuse instead.
    std::unordered_set<uint64_t> chunks;
    int64_t bytes = 0;
    for (const auto& entry : state.entries) {
      for (const auto& chunk : entry.item->chunks()) {
        if (chunks.insert(chunk->key()).second) bytes += chunk->memory_bytes();
      }
    }
    if (bytes > config_.max_bytes) {
      throw InvalidArgumentError(where + "its items hold " + std::to_string(bytes) +
                                 " bytes of chunks, more than the table's max_bytes " +
                                 std::to_string(config_.max_bytes));
    }
  }
  Released released;  // nothing is evicted (the items fit); kept for InsertLocked's signature
  std::lock_guard<std::mutex> lock(mu_);
  if (!entries_.empty()) {
    throw FailedPreconditionError(where + "the table already holds " + std::to_string(entries_.size()) + " items");
  }
  const size_t count = state.entries.size();
  try {
    for (auto& entry : state.entries) {
      InsertLocked(entry.item, entry.priority, released);
      Entry& restored = entries_.back();
      restored.times_sampled = entry.times_sampled;
      restored.inserted_at_ns = entry.inserted_at_ns;
    }
  } catch (...) {
    // Out of memory half-way: leave the table empty rather than half restored.
    while (!entries_.empty()) DeleteLocked(entries_.size() - 1, released);
    limiter_.ResetCounters();
    throw;
  }
  // Heaps break ties by recency of insert or update: replaying an update of
  // each item in its checkpointed order rebuilds the same ties.
  const auto replay = [&](SlotSelector& selector, uint64_t TableState::Entry::*order) {
    std::vector<size_t> slots;
    for (size_t slot = 0; slot < count; ++slot) {
      if (state.entries[slot].*order != 0) slots.push_back(slot);
    }
    std::sort(slots.begin(), slots.end(),
              [&](size_t a, size_t b) { return state.entries[a].*order < state.entries[b].*order; });
    for (const size_t slot : slots) selector.Update(slot, entries_[slot].priority);
  };
  replay(*sampler_, &TableState::Entry::sampler_tie_order);
  replay(*remover_, &TableState::Entry::remover_tie_order);
  limiter_.SetCounters(state.counters);
  num_deleted_episodes_ = state.num_deleted_episodes;
  num_unique_samples_ = state.num_unique_samples;
  ++num_changes_;
}

}  // namespace resound

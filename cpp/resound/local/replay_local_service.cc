#include "resound/local/replay_local_service.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "resound/chunk_holder.h"
#include "resound/errors.h"
#include "resound/column_gather.h"
#include "resound/insert_request.h"
#include "resound/local/gathered_batch.h"
#include "resound/local/packed_mutate_request.h"
#include "resound/local/shared_memory.h"
#include "resound/local/status_codes.h"
#include "resound/local/step_insert_request.h"
#include "resound/proto_reader.h"
#include "resound/proto_writer.h"
#include "resound/sample_response.h"
#include "resound/wire_messages.h"

namespace resound::local {
namespace {

// A wait for a rate limiter checks this often whether its client is gone.
constexpr double kWaitSliceSeconds = 0.05;
// Longer timeouts (inf included) wait forever, as the other transports read them.
constexpr double kForeverSeconds = 365.0 * 24 * 3600;

std::span<const uint8_t> AsUint8(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
}

[[noreturn]] void Abandoned() {
  throw CancelledError("the call ended: its client went away or the server is stopping");
}

// One sampled item larger than the connection's region: a region twice as
// large (at least 1 MB), up to the connection's limit (false at it).
bool EnlargeForOneItem(LocalReply& reply) {
  return reply.Enlarge(std::max<size_t>(2 * reply.capacity(), size_t{1} << 20));
}

StatusError ItemTooLarge(const LocalReply& reply) {
  return StatusError(kResourceExhausted, "a sampled item does not fit the local connection's largest region (" +
                                             std::to_string(reply.capacity()) +
                                             " bytes; raise the server's local region limit, or use gRPC)");
}

// Copies `bytes` into the reply's region and sends them (`rest`: see
// LocalReply::Send).
void SendBytes(LocalReply& reply, std::string_view bytes, std::function<void(LocalReply&)> rest = {}) {
  std::byte* out = reply.Allocate(bytes.size());
  if (out == nullptr) {
    throw StatusError(kResourceExhausted, "an answer of " + std::to_string(bytes.size()) +
                                              " bytes does not fit the connection's region of " +
                                              std::to_string(reply.capacity()));
  }
  std::memcpy(out, bytes.data(), bytes.size());
  reply.Send(bytes.size(), std::move(rest));
}

struct SampleRequest {
  std::string table;
  int64_t num_samples = 0;
  double timeout_seconds = 0.0;
  int64_t max_per_response = 0;
};

SampleRequest ReadSampleRequest(std::span<const std::byte> raw) {
  namespace f = wire::sample_request;
  SampleRequest request;
  ProtoReader reader(AsUint8(raw), "SampleRequest");
  while (reader.Next()) {
    switch (reader.field()) {
      case f::kTable:
        request.table = reader.string();
        break;
      case f::kNumSamples:
        request.num_samples = static_cast<int64_t>(reader.varint());
        break;
      case f::kTimeoutSeconds: {
        std::vector<double> values;
        reader.AppendDoubles(values);
        if (!values.empty()) request.timeout_seconds = values.back();
        break;
      }
      case f::kMaxPerResponse:
        request.max_per_response = static_cast<int64_t>(reader.varint());
        break;
      default:
        break;  // unknown fields are skipped, as protobuf does
    }
  }
  return request;
}

struct MutateRequest {
  std::string table;
  std::vector<uint64_t> update_keys;
  std::vector<double> update_priorities;
  std::vector<uint64_t> delete_keys;
};

MutateRequest ReadMutateRequest(std::span<const std::byte> raw) {
  namespace f = wire::mutate_priorities_request;
  MutateRequest request;
  ProtoReader reader(AsUint8(raw), "MutatePrioritiesRequest");
  while (reader.Next()) {
    switch (reader.field()) {
      case f::kTable:
        request.table = reader.string();
        break;
      case f::kUpdateKeys:
        reader.AppendVarints(request.update_keys);
        break;
      case f::kUpdatePriorities:
        reader.AppendDoubles(request.update_priorities);
        break;
      case f::kDeleteKeys:
        reader.AppendVarints(request.delete_keys);
        break;
      default:
        break;
    }
  }
  return request;
}

// A SampleStream's answer to a request whose wait ran out.
std::string TimedOutResponse(const std::string& reason) {
  ProtoWriter message;
  message.VarintField(wire::sample_response::kEndOfRequest, 1);
  message.VarintField(wire::sample_response::kTimedOut, 1);
  message.BytesField(wire::sample_response::kTimeoutReason, reason);
  return message.data();
}

// Thrown by the allocator of a response that would not fit the region.
struct DoesNotFit {};

// Sends the responses of a batch one at a time: each as much as fits the
// region (and max_per_response), the next one when the client continues.
class SampleParts : public std::enable_shared_from_this<SampleParts> {
 public:
  SampleParts(std::vector<SampledItem> samples, size_t max_items, bool mark_end)
      : samples_(std::move(samples)), max_items_(max_items), mark_end_(mark_end) {}

  void SendNext(LocalReply& reply) {
    // Chunk payloads take nearly all of a response; the rest is bounded by
    // what it tries first, and halved until it fits.
    size_t max_bytes = reply.capacity() / 2;
    size_t max_items = max_items_;
    while (true) {
      size_t size = 0;
      try {
        const size_t end = WriteSampleResponse(samples_, next_, max_items, max_bytes, mark_end_, [&](size_t bytes) {
          std::byte* out = reply.Allocate(bytes);
          if (out == nullptr) throw DoesNotFit{};
          size = bytes;
          return reinterpret_cast<char*>(out);
        });
        next_ = end;
      } catch (const DoesNotFit&) {
        if (max_items == 1 || max_bytes == 0) {
          if (!EnlargeForOneItem(reply)) throw ItemTooLarge(reply);
          max_bytes = reply.capacity() / 2;
          continue;
        }
        max_bytes /= 4;
        max_items = std::max<size_t>(1, std::min(max_items, samples_.size() - next_) / 2);
        continue;
      }
      if (next_ < samples_.size()) {
        auto self = shared_from_this();
        reply.Send(size, [self](LocalReply& rest) { self->SendNext(rest); });
      } else {
        reply.Send(size);
      }
      return;
    }
  }

 private:
  const std::vector<SampledItem> samples_;
  const size_t max_items_;
  const bool mark_end_;
  size_t next_ = 0;
};

// Sends a batch whose columns all stack as gathered parts, one at a time:
// each as many samples as fit the region, the next when the client continues.
class GatheredParts : public std::enable_shared_from_this<GatheredParts> {
 public:
  GatheredParts(std::vector<SampledItem> samples, std::vector<ColumnLayout> columns)
      : samples_(std::move(samples)), columns_(std::move(columns)) {}

  void SendNext(LocalReply& reply) {
    while (true) {
      std::byte* out = reply.Allocate(reply.capacity());
      const auto [end, size] =
          WriteGatheredPart(samples_, columns_, next_, {out, out == nullptr ? 0 : reply.capacity()});
      if (size > 0) {
        Send(reply, end, size);
        return;
      }
      if (!EnlargeForOneItem(reply)) throw ItemTooLarge(reply);
    }
  }

 private:
  void Send(LocalReply& reply, size_t end, size_t size) {
    next_ = end;
    if (next_ < samples_.size()) {
      auto self = shared_from_this();
      reply.Send(size, [self](LocalReply& rest) { self->SendNext(rest); });
    } else {
      reply.Send(size);
    }
  }

  const std::vector<SampledItem> samples_;
  const std::vector<ColumnLayout> columns_;
  size_t next_ = 0;
};

// The layouts of every column of `samples` if all of them stack.
std::optional<std::vector<ColumnLayout>> StackedLayouts(std::span<const SampledItem> samples) {
  const size_t num_columns = samples.front().item->trajectory().size();
  std::vector<ColumnLayout> columns;
  columns.reserve(num_columns);
  for (size_t c = 0; c < num_columns; ++c) {
    std::optional<ColumnLayout> layout = PlanColumn(samples, c);
    if (!layout) return std::nullopt;
    columns.push_back(std::move(*layout));
  }
  return columns;
}

}  // namespace

// Inserts one InsertRequest's items run by run, in order, waiting for rate
// limiters in slices; answers with InsertResponse confirmations (in parts
// while a limiter holds the rest up).
class ReplayLocalService::InsertProgress : public std::enable_shared_from_this<InsertProgress> {
 public:
  InsertProgress(const ReplayLocalService& service, ChunkHolder& holder, InsertRequestMessage message)
      : service_(service), holder_(holder), message_(std::move(message)) {}

  // Goes on from run `run`, of `table`, whose items are `prepared` and of
  // which the first `applied` are in (the runs before it all are).
  void ResumeAt(size_t run, std::shared_ptr<Table> table, std::vector<Table::PreparedInsert> prepared,
                size_t applied) noexcept {
    run_ = run;
    table_ = std::move(table);
    prepared_ = std::move(prepared);
    applied_ = applied;
  }

  void Advance(LocalReply& reply) {
    while (run_ < message_.runs.size()) {
      const TableRun& run = message_.runs[run_];
      if (prepared_.empty() && run.end > run.begin) {
        table_ = service_.Find(message_.tables[run.table]);
        prepared_ = table_->Prepare(ReceivedItemRequests(message_.keys, message_.priorities, message_.trajectories,
                                                         holder_, run.begin, run.end));
        applied_ = 0;
      }
      while (applied_ < prepared_.size()) {
        // At once if the table has room (nearly always), then in slices.
        const Deadline deadline = Deadline::AfterSeconds(waited_ ? kWaitSliceSeconds : 0.0);
        const InsertBatchResult result = table_->InsertPrepared(prepared_, applied_, deadline);
        applied_ += result.num_applied;
        if (result.error && !IsDeadlineExceeded(result.error)) std::rethrow_exception(result.error);
        if (!result.error) break;
        const size_t done = run.begin + applied_;
        if (done > confirmed_) {
          // A writer ahead of its table learns what went in; its Continue
          // waits for the rest.
          auto self = shared_from_this();
          SendConfirmation(reply, done, [self](LocalReply& rest) { self->Advance(rest); });
          waited_ = true;
          return;
        }
        if (reply.abandoned()) Abandoned();
        waited_ = true;
      }
      prepared_.clear();
      table_.reset();
      waited_ = false;
      ++run_;
    }
    for (const uint64_t key : message_.release_chunk_keys) holder_.Release(key);
    SendConfirmation(reply, message_.keys.size(), {});
  }

 private:
  void SendConfirmation(LocalReply& reply, size_t end, std::function<void(LocalReply&)> rest) {
    ProtoWriter response;
    response.PackedVarints(wire::insert_response::kItemKeys,
                           std::vector<uint64_t>(message_.keys.begin() + static_cast<std::ptrdiff_t>(confirmed_),
                                                 message_.keys.begin() + static_cast<std::ptrdiff_t>(end)));
    confirmed_ = end;
    SendBytes(reply, response.data(), std::move(rest));
  }

  const ReplayLocalService& service_;
  ChunkHolder& holder_;
  InsertRequestMessage message_;
  size_t run_ = 0;
  std::shared_ptr<Table> table_;
  std::vector<Table::PreparedInsert> prepared_;
  size_t applied_ = 0;    // of prepared_
  size_t confirmed_ = 0;  // items of the message confirmed so far
  bool waited_ = false;
};

class ReplayLocalService::Session final : public LocalSession {
 public:
  explicit Session(ReplayLocalService& service) : service_(service) {}

  void Handle(uint32_t method, std::span<const std::byte> request, LocalReply& reply) override {
    switch (method) {
      case kInsert:
        Insert(request, reply);
        return;
      case kInsertStep:
        InsertStep(request, reply);
        return;
      case kSample:
      case kSampleStream:
      case kSampleGathered:
      case kSampleInto: {
        std::span<std::byte> region;
        if (method == kSampleInto) {
          region = BatchRegion(request, reply);
          request = request.subspan(BatchRegionRequest::kBytes);
        }
        std::optional<SampledBatch> batch = TakeSamples(request, reply, method != kSample);
        if (!batch) return;  // answered: its wait ran out
        if (method == kSampleGathered || method == kSampleInto) {
          if (auto columns = StackedLayouts(batch->samples)) {
            size_t needed = 0;
            const std::vector<uint64_t> offsets = RegionOffsets(*columns, batch->samples.size(), &needed);
            if (!region.empty() && needed <= region.size()) {
              std::byte* out = reply.Allocate(reply.capacity());
              const size_t size = out == nullptr ? 0
                                                 : WriteGatheredToRegion(batch->samples, *columns, offsets, region,
                                                                         {out, reply.capacity()});
              if (size > 0) {
                reply.Send(size);
                return;
              }
            }
            std::make_shared<GatheredParts>(std::move(batch->samples), std::move(*columns))->SendNext(reply);
            return;
          }
        }
        const size_t max_items = batch->max_per_response > 0 ? static_cast<size_t>(batch->max_per_response)
                                                               : batch->samples.size();
        std::make_shared<SampleParts>(std::move(batch->samples), max_items, method != kSample)->SendNext(reply);
        return;
      }
      case kMutatePriorities:
        MutatePriorities(request, reply);
        return;
      case kMutatePrioritiesPacked: {
        const PackedMutateRequest packed = PackedMutateRequest::Read(request);
        Mutate(*service_.Find(packed.table), packed.updates, packed.deletes, reply);
        return;
      }
      default:
        if (!service_.fallback_) throw StatusError(kUnimplemented, "unknown method " + std::to_string(method));
        SendBytes(reply, service_.fallback_(method, request));
    }
  }

 private:
  void Insert(std::span<const std::byte> raw, LocalReply& reply) {
    InsertRequestMessage message = ReadInsertRequest(AsUint8(raw));
    // Where each chunk's payload is, with arena refs (some in the client's
    // payload arena, the others in the data tail); else back to back in
    // chunk_data.
    std::vector<std::span<const std::byte>> payloads;
    if (const std::span<const std::byte> tail = reply.data_tail(); !tail.empty() || reply.arena_refs()) {
      // The chunks' payloads, left in the client's region (or arena):
      // copied once, into the chunk store (MakeChunks checks their sizes
      // against the message's own copy of the chunks' metadata).
      if (!message.chunk_data.empty()) {
        throw InvalidArgumentError("an InsertRequest with a data tail must not carry chunk_data as well");
      }
      if (reply.arena_refs()) {
        payloads = wire::PayloadsWithArenaRefs(message.chunks.keys, message.chunks.data_sizes, tail, reply.arena(),
                                               reply.max_request_bytes());
      } else {
        message.chunk_data = tail;
      }
    }
    ChunkStore& store = *service_.store_;
    if (service_.max_bytes_) {
      int64_t brought = 0;
      const auto& chunks = message.chunks;
      for (size_t i = 0; i < chunks.keys.size() && i < chunks.data_sizes.size(); ++i) {
        if (!store.Find(chunks.keys[i])) brought += chunks.data_sizes[i];
      }
      CheckRoomFor(brought);
    }
    if (reply.arena_refs()) {
      for (auto& chunk : wire::MakeChunks(message.chunks, payloads, store)) holder_.Hold(std::move(chunk));
    } else if (!message.chunks.keys.empty() || !message.chunk_data.empty()) {
      for (auto& chunk : wire::MakeChunks(message.chunks, message.chunk_data, store)) holder_.Hold(std::move(chunk));
    }
    message.chunk_data = {};  // it points into the request, which the next one overwrites
    auto progress = std::make_shared<InsertProgress>(service_, holder_, std::move(message));
    progress->Advance(reply);
  }

  // Refuses a message that brings `brought` bytes of new chunks past the
  // server's max_bytes, before anything of it is stored (as over gRPC).
  void CheckRoomFor(int64_t brought) const {
    const int64_t held = service_.store_->memory_bytes();
    if (brought > 0 && held + brought > *service_.max_bytes_) {
      throw StatusError(kResourceExhausted,
                        "the server holds " + std::to_string(held) + " bytes of chunks and this message brings " +
                            std::to_string(brought) + " more, past its max_bytes of " +
                            std::to_string(*service_.max_bytes_) +
                            "; nothing of the message was stored (free room: reset or sample from queues, or "
                            "raise max_bytes)");
    }
  }

  // client.insert's step: its chunks made and its items inserted at once,
  // without an InsertRequest's vectors (the items alone hold the chunks).
  // When a rate limiter holds an item up, the rest goes on as an
  // InsertRequest's would (InsertProgress), the session holding the chunks
  // until the last item is in.
  void InsertStep(std::span<const std::byte> raw, LocalReply& reply) {
    if (reply.arena_refs()) throw InvalidArgumentError("a step insert carries its payloads in its data tail");
    const StepInsertRequest step = StepInsertRequest::Read(raw, reply.data_tail());
    const auto& fields = step.fields();
    const auto& items = step.items();
    ChunkStore& store = *service_.store_;
    if (service_.max_bytes_) {
      int64_t brought = 0;
      for (const auto& field : fields) {
        if (!store.Find(field.key)) brought += static_cast<int64_t>(field.data.size());
      }
      CheckRoomFor(brought);
    }
    std::vector<std::shared_ptr<const Chunk>> chunks;
    chunks.reserve(fields.size());
    Trajectory trajectory;  // every item's: each field's chunk, whole
    trajectory.reserve(fields.size());
    for (size_t i = 0; i < fields.size(); ++i) {
      try {
        chunks.push_back(store.Insert(step.ChunkOf(i), fields[i].data));
      } catch (const InvalidArgumentError& error) {
        throw InvalidArgumentError("chunk " + std::to_string(fields[i].key) + " is invalid: " + error.what());
      }
      trajectory.push_back({{{fields[i].key, 0, 1}}, false});
    }
    // Runs of items of one table, in order, as an InsertRequest's.
    std::vector<std::string> tables;  // a few: searched in order
    std::vector<uint32_t> table_indices;
    table_indices.reserve(items.size());
    for (const auto& item : items) {
      const auto index = std::find(tables.begin(), tables.end(), item.table) - tables.begin();
      if (static_cast<size_t>(index) == tables.size()) tables.push_back(item.table);
      table_indices.push_back(static_cast<uint32_t>(index));
    }
    std::vector<TableRun> runs = RunsOf(table_indices);
    for (size_t r = 0; r < runs.size(); ++r) {
      const TableRun& run = runs[r];
      std::shared_ptr<Table> table = service_.Find(tables[run.table]);
      std::vector<ItemRequest> requests;
      requests.reserve(run.end - run.begin);
      for (size_t i = run.begin; i < run.end; ++i) {
        requests.push_back({items[i].key, items[i].priority, trajectory});
        CheckReceivedItem(requests.back());
      }
      std::vector<Table::PreparedInsert> prepared = table->Prepare(std::move(requests));
      const InsertBatchResult result = table->InsertPrepared(prepared, 0, Deadline::AfterSeconds(0.0));
      if (result.error && !IsDeadlineExceeded(result.error)) std::rethrow_exception(result.error);
      if (result.error) {
        // Held up: the rest as an InsertRequest's, the chunks in the session.
        InsertRequestMessage message;
        message.tables = std::move(tables);
        message.runs = std::move(runs);
        message.trajectories.Reserve(items.size(), items.size() * fields.size());
        for (const auto& item : items) {
          message.keys.push_back(item.key);
          message.priorities.push_back(item.priority);
          message.trajectories.Append(trajectory);
        }
        for (auto& chunk : chunks) {
          message.release_chunk_keys.push_back(chunk->key());
          holder_.Hold(std::move(chunk));
        }
        auto progress = std::make_shared<InsertProgress>(service_, holder_, std::move(message));
        progress->ResumeAt(r, std::move(table), std::move(prepared), result.num_applied);
        progress->Advance(reply);
        return;
      }
    }
    std::vector<uint64_t> keys;
    keys.reserve(items.size());
    for (const auto& item : items) keys.push_back(item.key);
    ProtoWriter response;
    response.PackedVarints(wire::insert_response::kItemKeys, keys);
    SendBytes(reply, response.data());
  }

  // As the gRPC servicer's MutatePriorities, without the GIL: a learner's
  // priority updates are its most frequent small call.
  void MutatePriorities(std::span<const std::byte> raw, LocalReply& reply) {
    const MutateRequest request = ReadMutateRequest(raw);
    const std::shared_ptr<Table> table = service_.Find(request.table);  // first, as the gRPC servicer
    if (request.update_keys.size() != request.update_priorities.size()) {
      throw InvalidArgumentError("update_keys (" + std::to_string(request.update_keys.size()) +
                                 ") and update_priorities (" + std::to_string(request.update_priorities.size()) +
                                 ") must have the same length");
    }
    std::vector<std::pair<uint64_t, double>> updates;
    updates.reserve(request.update_keys.size());
    for (size_t i = 0; i < request.update_keys.size(); ++i) {
      updates.emplace_back(request.update_keys[i], request.update_priorities[i]);
    }
    Mutate(*table, updates, request.delete_keys, reply);
  }

  // Either MutatePriorities request's work and answer.
  void Mutate(Table& table, const std::vector<std::pair<uint64_t, double>>& updates,
              const std::vector<uint64_t>& deletes, LocalReply& reply) {
    const MutateResult result = table.MutatePriorities(updates, deletes);
    ProtoWriter response;
    if (result.num_updated != 0) {
      response.VarintField(wire::mutate_priorities_response::kNumUpdated, static_cast<uint64_t>(result.num_updated));
    }
    if (result.num_deleted != 0) {
      response.VarintField(wire::mutate_priorities_response::kNumDeleted, static_cast<uint64_t>(result.num_deleted));
    }
    SendBytes(reply, response.data());
  }

  struct SampledBatch {
    std::vector<SampledItem> samples;
    int64_t max_per_response = 0;
  };

  // The samples a request asks for, waiting for the rate limiter in slices;
  // nullopt if the wait ran out and `stream` (the timed_out answer is sent).
  std::optional<SampledBatch> TakeSamples(std::span<const std::byte> raw, LocalReply& reply, bool stream) {
    const Deadline::Clock::time_point arrived = Deadline::Clock::now();
    const SampleRequest request = ReadSampleRequest(raw);
    if (request.num_samples < 1) {
      throw InvalidArgumentError("num_samples must be >= 1, got " + std::to_string(request.num_samples));
    }
    if (std::isnan(request.timeout_seconds)) throw InvalidArgumentError("timeout_seconds must not be NaN");
    const std::shared_ptr<Table> table = service_.Find(request.table);
    const int64_t count = std::min(request.num_samples, Table::kMaxSamplesPerCall);
    const bool forever = request.timeout_seconds < 0 || request.timeout_seconds > kForeverSeconds;
    const auto deadline =
        arrived + std::chrono::duration_cast<Deadline::Clock::duration>(
                      std::chrono::duration<double>(forever ? 0.0 : request.timeout_seconds));
    std::vector<SampledItem> samples;
    bool waited = false;
    while (true) {
      double slice = 0.0;
      if (waited) {
        slice = kWaitSliceSeconds;
        if (!forever) {
          slice = std::min(slice, std::chrono::duration<double>(deadline - Deadline::Clock::now()).count());
        }
      }
      try {
        samples = table->Sample(count, Deadline::AfterSeconds(std::max(0.0, slice)));
        break;
      } catch (const DeadlineExceededError&) {
      }
      if (!forever && Deadline::Clock::now() >= deadline) {
        const std::string why = table->WhyBlocked(false);
        if (!stream) throw DeadlineExceededError(why);
        SendBytes(reply, TimedOutResponse(why));
        return std::nullopt;
      }
      if (reply.abandoned()) Abandoned();
      waited = true;
    }
    return SampledBatch{std::move(samples), request.max_per_response};
  }

  // The batch region a SampleInto request names: the one its descriptor
  // brings (mapped for writing; replacing the slot's), else the slot's;
  // empty if there is none or it would take the connection past its limit.
  std::span<std::byte> BatchRegion(std::span<const std::byte> request, LocalReply& reply) {
    if (request.size() < BatchRegionRequest::kBytes) throw InvalidArgumentError("SampleInto: no region prefix");
    BatchRegionRequest prefix;
    std::memcpy(&prefix.slot, request.data(), sizeof prefix.slot);
    std::memcpy(&prefix.region_bytes, request.data() + 8, sizeof prefix.region_bytes);
    if (prefix.slot >= BatchRegionRequest::kSlots) {
      throw InvalidArgumentError("SampleInto: slot " + std::to_string(prefix.slot) + ", not in [0, " +
                                 std::to_string(BatchRegionRequest::kSlots) + ")");
    }
    SharedMemory& slot = batch_regions_[prefix.slot];
    UniqueFd fd = reply.TakeAttachment();
    if (fd.valid()) {
      slot = SharedMemory();  // the old region goes either way
      size_t others = 0;
      for (const SharedMemory& region : batch_regions_) others += region.size();
      if (prefix.region_bytes == 0 || prefix.region_bytes > service_.max_batch_region_bytes_ - others) return {};
      slot = SharedMemory::AdoptWritable(std::move(fd), prefix.region_bytes);
    }
    return {slot.data(), slot.size()};
  }

  ReplayLocalService& service_;
  ChunkHolder holder_;  // the chunks this connection's inserts sent and did not release
  // Clients' regions that batches are gathered into, by slot.
  std::array<SharedMemory, BatchRegionRequest::kSlots> batch_regions_;
};

ReplayLocalService::ReplayLocalService(std::shared_ptr<ChunkStore> store, std::optional<int64_t> max_bytes,
                                       Fallback fallback, size_t max_batch_region_bytes)
    : store_(std::move(store)),
      max_bytes_(max_bytes),
      fallback_(std::move(fallback)),
      max_batch_region_bytes_(max_batch_region_bytes) {
  if (!store_) throw InvalidArgumentError("local service: no chunk store");
}

void ReplayLocalService::SetTables(std::map<std::string, std::shared_ptr<Table>> tables) {
  std::lock_guard<std::mutex> lock(mu_);
  tables_ = std::move(tables);
}

std::unique_ptr<LocalSession> ReplayLocalService::Open() { return std::make_unique<Session>(*this); }

std::shared_ptr<Table> ReplayLocalService::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto found = tables_.find(name);
  if (found != tables_.end()) return found->second;
  // As the server's Python side says it (Reverb's words).
  std::string names;
  for (const auto& [table, _] : tables_) names += (names.empty() ? "" : ", ") + table;
  throw NotFoundError("Priority table " + name + " was not found. The following tables exist: " + names + ".");
}

}  // namespace resound::local

// The replay service of the local transport against real tables: gathered
// batches (bytes, parts, infos), the SampleResponse answer when a column
// does not stack, MutatePriorities, and several clients at once (the calls'
// C++ path runs under the sanitizers here, not in the Python suite).
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/insert_request_encoder.h"
#include "resound/local/batch_regions.h"
#include "resound/local/payload_arena.h"
#include "resound/local/gathered_batch.h"
#include "resound/local/insert_exchange.h"
#include "resound/local/local_client.h"
#include "resound/local/local_server.h"
#include "resound/local/replay_local_service.h"
#include "resound/local/status_codes.h"
#include "resound/local/step_insert_request.h"
#include "resound/proto_reader.h"
#include "resound/proto_writer.h"
#include "resound/table.h"
#include "resound/wire_messages.h"

namespace resound::local {
namespace {

constexpr int64_t kSteps = 4;
constexpr int64_t kWidth = 100;  // floats per row: 400 bytes
constexpr int64_t kRowBytes = kWidth * 4;

Deadline Soon() { return Deadline::AfterSeconds(10); }

// Payload bytes depend on the key, so every sample's rows can be checked.
std::byte PayloadByte(uint64_t key, size_t at) { return std::byte((key * 31 + at) & 0xff); }

// A chunk of `steps` rows of kWidth floats.
std::shared_ptr<const Chunk> AddChunk(ChunkStore& store, uint64_t key, int64_t steps = kSteps) {
  ChunkMetadata metadata;
  metadata.key = key;
  metadata.dtype = DType::Parse("<f4");
  metadata.step_shape = {kWidth};
  metadata.num_steps = steps;
  metadata.end_step = steps - 1;
  metadata.uncompressed_size = Chunk::RawSize(metadata);
  std::vector<std::byte> payload(static_cast<size_t>(metadata.uncompressed_size));
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = PayloadByte(key, i);
  return store.Insert(metadata, payload);
}

std::shared_ptr<Table> MakeTable(const std::string& name, const std::shared_ptr<ChunkStore>& store) {
  TableConfig config;
  config.name = name;
  config.sampler = {SelectorKind::kPrioritized, 1.0, 1};
  config.remover = {SelectorKind::kFifo, 1.0, 2};
  config.max_size = 1000;
  config.rate_limiter = RateLimiterConfig::MinSize(1);
  return std::make_shared<Table>(config, store);
}

// Item `key`: column 0 is rows [1, 3) of its chunk, column 1 row 3 squeezed
// (with `ragged`, column 0 of odd keys is one row longer).
void InsertItem(Table& table, ChunkStore& store, uint64_t key, bool ragged = false) {
  auto chunk = AddChunk(store, key);
  const int64_t length = ragged && key % 2 == 1 ? 3 : 2;
  ItemRequest request{key, 1.0, {{{{chunk->key(), 1, length}}, false}, {{{chunk->key(), 3, 1}}, true}}};
  table.Insert(std::move(request), Soon());
}

size_t PutSampleRequest(LocalClient& client, const std::string& table, int64_t count) {
  ProtoWriter request;
  request.BytesField(wire::sample_request::kTable, table);
  request.VarintField(wire::sample_request::kNumSamples, static_cast<uint64_t>(count));
  request.PackedDoubles(wire::sample_request::kTimeoutSeconds, {-1.0});
  std::memcpy(client.request_buffer(), request.data().data(), request.data().size());
  return request.data().size();
}

// Checks the rows of sample `key` (column 0: rows 1-2, column 1: row 3).
void CheckRows(uint64_t key, std::span<const std::byte> column0, std::span<const std::byte> column1) {
  RESOUND_CHECK(column0.size() == 2 * kRowBytes && column1.size() == kRowBytes);
  for (size_t i = 0; i < column0.size(); ++i) RESOUND_CHECK(column0[i] == PayloadByte(key, kRowBytes + i));
  for (size_t i = 0; i < column1.size(); ++i) RESOUND_CHECK(column1[i] == PayloadByte(key, 3 * kRowBytes + i));
}

// Samples `count` gathered and checks every byte; returns the parts read.
int SampleGatheredAndCheck(LocalClient& client, int64_t count) {
  LocalClient::Response response = client.Call(kSampleGathered, PutSampleRequest(client, "t", count), Soon());
  std::vector<uint64_t> keys;
  int64_t next = 0;
  int parts = 0;
  while (true) {
    RESOUND_CHECK(IsGatheredPart(response.payload));
    const GatheredPart part = ReadGatheredPart(response.payload);
    ++parts;
    RESOUND_CHECK(part.total == count && part.begin == next && part.columns.size() == 2);
    RESOUND_CHECK(part.columns[0].rows == 2 && !part.columns[0].squeeze && part.columns[1].squeeze);
    if (part.begin == 0) {
      keys = part.keys;
      for (const int32_t times : part.times_sampled) RESOUND_CHECK(times >= 1);
    }
    const size_t n = static_cast<size_t>(part.end - part.begin);
    const std::span<const std::byte> column0 = part.data.subspan(0, n * 2 * kRowBytes);
    const std::span<const std::byte> column1 = part.data.subspan(n * 2 * kRowBytes);
    for (size_t i = 0; i < n; ++i) {
      CheckRows(keys.at(static_cast<size_t>(part.begin) + i), column0.subspan(i * 2 * kRowBytes, 2 * kRowBytes),
                column1.subspan(i * kRowBytes, kRowBytes));
    }
    next = part.end;
    if (!response.more) break;
    response = client.Continue(Soon());
  }
  RESOUND_CHECK(next == count);
  return parts;
}

struct Fixture {
  std::shared_ptr<ChunkStore> store = std::make_shared<ChunkStore>();
  std::shared_ptr<Table> table = MakeTable("t", store);
  std::shared_ptr<Table> ragged = MakeTable("ragged", store);
  std::shared_ptr<ReplayLocalService> service;
  std::unique_ptr<LocalServer> server;

  explicit Fixture(const std::string& path, ConnectionLimits limits = {}) {
    for (uint64_t key = 1; key <= 20; ++key) InsertItem(*table, *store, key);
    for (uint64_t key = 101; key <= 104; ++key) InsertItem(*ragged, *store, key, true);
    service = std::make_shared<ReplayLocalService>(store, std::nullopt, [](uint32_t, std::span<const std::byte>) {
      return std::string();  // no fallback call in these tests
    });
    service->SetTables({{"t", table}, {"ragged", ragged}});
    server = std::make_unique<LocalServer>(LocalServerOptions{path, {}, 16, limits, "token"}, service);
  }

  // Serves "t" and a new "queue" of one item (a Queue(1) limiter) instead
  // of "ragged"; returns the queue.
  std::shared_ptr<Table> ServeQueue() {
    TableConfig config;
    config.name = "queue";
    config.sampler = {SelectorKind::kFifo, 1.0, 1};
    config.remover = {SelectorKind::kFifo, 1.0, 2};
    config.max_size = 1;
    config.rate_limiter = RateLimiterConfig::Queue(1);
    auto queue = std::make_shared<Table>(config, store);
    service->SetTables({{"t", table}, {"queue", queue}});
    return queue;
  }
};

void GatheredBatchesCarryEveryByte(const std::string& dir) {
  Fixture fixture(dir + "/gathered.sock");
  // A region of 8 KB holds 6 samples of 1200 bytes: 16 come in 3 parts.
  LocalClient small(fixture.server->path(), 1 << 12, 1 << 13, Soon());
  RESOUND_CHECK(SampleGatheredAndCheck(small, 16) == 3);
  RESOUND_CHECK(SampleGatheredAndCheck(small, 1) == 1);
  // A region too small for one sample: the server makes a larger one (1 MB)
  // that comes with the answer, and the later answers use it.
  LocalClient tiny(fixture.server->path(), 1 << 12, 1024, Soon());
  RESOUND_CHECK(SampleGatheredAndCheck(tiny, 2) == 1);
  RESOUND_CHECK(tiny.response_capacity() == size_t{1} << 20);
  RESOUND_CHECK(SampleGatheredAndCheck(tiny, 16) == 1);

  // Columns that do not stack (ragged rows): SampleResponses instead.
  LocalClient client(fixture.server->path(), 1 << 12, 1 << 20, Soon());
  const LocalClient::Response response =
      client.Call(kSampleGathered, PutSampleRequest(client, "ragged", 4), Soon());
  RESOUND_CHECK(!IsGatheredPart(response.payload) && !response.more);
  // Malformed parts are refused, not read past their end.
  std::vector<std::byte> forged(64);
  const uint32_t prefix[2] = {kGatheredMagic, 1000};
  std::memcpy(forged.data(), prefix, sizeof prefix);
  bool refused = false;
  try {
    ReadGatheredPart(forged);
  } catch (const InvalidArgumentError&) {
    refused = true;
  }
  RESOUND_CHECK(refused);
}

StatusError CallFails(LocalClient& client, uint32_t method, size_t size) {
  try {
    client.Call(method, size, Soon());
  } catch (const StatusError& error) {
    return error;
  }
  RESOUND_CHECK(false);
  return StatusError(kUnknown, "");
}

// A SampleInto request for `count` samples into the lease's region.
size_t PutSampleIntoRequest(LocalClient& client, const BatchRegions::Lease& lease, int64_t count) {
  const size_t size = PutSampleRequest(client, "t", count);
  std::memmove(client.request_buffer() + BatchRegionRequest::kBytes, client.request_buffer(), size);
  const uint64_t region_bytes = lease.region->size();
  std::memset(client.request_buffer(), 0, BatchRegionRequest::kBytes);
  std::memcpy(client.request_buffer(), &lease.slot, sizeof lease.slot);
  std::memcpy(client.request_buffer() + 8, &region_bytes, sizeof region_bytes);
  return BatchRegionRequest::kBytes + size;
}

void BatchesGoIntoTheClientsRegion(const std::string& dir) {
  Fixture fixture(dir + "/region.sock");
  LocalClient client(fixture.server->path(), 1 << 12, 1 << 16, Soon());
  BatchRegions& regions = client.batch_regions();
  const auto lease = regions.Take(16 * 1200 + 4096, size_t{1} << 24);
  RESOUND_CHECK(lease && lease->send);
  for (int round = 0; round < 3; ++round) {
    const int fd = lease->region->fd();
    // The descriptor goes with the first call only; later calls name the slot.
    const LocalClient::Response response =
        client.Call(kSampleInto, PutSampleIntoRequest(client, *lease, 16), Soon(),
                    round == 0 ? std::span<const int>(&fd, 1) : std::span<const int>());
    RESOUND_CHECK(!response.more);
    const GatheredPart part = ReadGatheredPart(response.payload);
    RESOUND_CHECK(part.in_region && part.total == 16 && part.region_offsets.size() == 2);
    CheckRegionOffsets(part, lease->region->size());
    RESOUND_CHECK(part.region_offsets[1] % 64 == 0);
    for (size_t i = 0; i < 16; ++i) {
      const std::byte* base = lease->region->data();
      CheckRows(part.keys[i], {base + part.region_offsets[0] + i * 2 * kRowBytes, 2 * kRowBytes},
                {base + part.region_offsets[1] + i * kRowBytes, kRowBytes});
    }
  }
  // A batch larger than the region (1 MiB): gathered parts in the
  // connection's own region instead (the client copies them).
  LocalClient::Response larger = client.Call(kSampleInto, PutSampleIntoRequest(client, *lease, 1000), Soon());
  RESOUND_CHECK(IsGatheredPart(larger.payload) && !ReadGatheredPart(larger.payload).in_region);
  while (larger.more) larger = client.Continue(Soon());
  // A slot out of range is refused; the connection goes on.
  const size_t size = PutSampleIntoRequest(client, *lease, 1);
  std::memset(client.request_buffer(), 0xff, 4);
  RESOUND_CHECK(CallFails(client, kSampleInto, size).code() == kInvalidArgument);
  RESOUND_CHECK(!client.broken());
}

size_t PutMutateRequest(LocalClient& client, const std::string& table, const std::vector<uint64_t>& keys,
                        const std::vector<double>& priorities, const std::vector<uint64_t>& deletes) {
  namespace f = wire::mutate_priorities_request;
  ProtoWriter request;
  request.BytesField(f::kTable, table);
  request.PackedVarints(f::kUpdateKeys, keys);
  request.PackedDoubles(f::kUpdatePriorities, priorities);
  request.PackedVarints(f::kDeleteKeys, deletes);
  std::memcpy(client.request_buffer(), request.data().data(), request.data().size());
  return request.data().size();
}

std::pair<uint64_t, uint64_t> MutateCounts(std::span<const std::byte> payload) {
  ProtoReader reader({reinterpret_cast<const uint8_t*>(payload.data()), payload.size()}, "MutatePrioritiesResponse");
  uint64_t updated = 0, deleted = 0;
  while (reader.Next()) {
    if (reader.field() == wire::mutate_priorities_response::kNumUpdated) updated = reader.varint();
    if (reader.field() == wire::mutate_priorities_response::kNumDeleted) deleted = reader.varint();
  }
  return {updated, deleted};
}

void MutatePrioritiesInCpp(const std::string& dir) {
  Fixture fixture(dir + "/mutate.sock");
  LocalClient client(fixture.server->path(), 1 << 12, 1 << 12, Soon());
  // Key 999 is not in the table: ignored. Key 5 is deleted.
  const auto [updated, deleted] = MutateCounts(
      client.Call(kMutatePriorities, PutMutateRequest(client, "t", {1, 2, 999}, {3.0, 4.0, 5.0}, {5}), Soon())
          .payload);
  RESOUND_CHECK(updated == 2 && deleted == 1);
  RESOUND_CHECK(fixture.table->Info().current_size == 19);
  // Refusals change nothing: lengths that do not pair up, a NaN priority,
  // an unknown table.
  RESOUND_CHECK(CallFails(client, kMutatePriorities, PutMutateRequest(client, "t", {1, 2}, {1.0}, {})).code() ==
                kInvalidArgument);
  RESOUND_CHECK(CallFails(client, kMutatePriorities, PutMutateRequest(client, "t", {3}, {0.0 / 0.0}, {4})).code() ==
                kInvalidArgument);
  RESOUND_CHECK(CallFails(client, kMutatePriorities, PutMutateRequest(client, "nope", {1}, {1.0}, {})).code() ==
                kNotFound);
  RESOUND_CHECK(fixture.table->Info().current_size == 19);
}

// A region grows for one sample only up to the connection's limit: a
// sample larger than that is refused with RESOURCE_EXHAUSTED, and the
// connection serves the next call.
void RegionsGrowOnlyUpToTheLimit(const std::string& dir) {
  Fixture limited(dir + "/limited.sock", ConnectionLimits{1024, 10.0});
  LocalClient capped(limited.server->path(), 1024, 1024, Soon());
  try {
    capped.Call(kSampleGathered, PutSampleRequest(capped, "t", 2), Soon());
    RESOUND_CHECK(false);
  } catch (const StatusError& error) {
    RESOUND_CHECK(error.code() == kResourceExhausted);
  }
  RESOUND_CHECK(!capped.broken() && capped.response_capacity() == 1024);
  const auto [updated, deleted] =
      MutateCounts(capped.Call(kMutatePriorities, PutMutateRequest(capped, "t", {1}, {2.0}, {}), Soon()).payload);
  RESOUND_CHECK(updated == 1 && deleted == 0);
}

// An insert in the data-tail layout (an insert stream's, over the local
// transport): its chunk's payload goes from the client's region straight
// into the chunk store, byte for byte. A data tail whose message size runs
// past the request ends the connection; one whose message carries
// chunk_data too is refused; neither stores anything.
void InsertsWithADataTail(const std::string& dir) {
  Fixture fixture(dir + "/tail.sock");
  auto client_store = std::make_shared<ChunkStore>();
  InsertRequestEncoder encoder(client_store);
  const auto chunk = AddChunk(*client_store, 500);
  encoder.Add("t", 500, 2.0, {{{{500, 0, 2}}, false}});
  LocalClient client(fixture.server->path(), 1 << 14, 1 << 12, Soon());
  size_t size = 0;
  encoder.TakeMessage(
      10, 1 << 20,
      [&](size_t bytes) {
        size = bytes;
        return reinterpret_cast<char*>(client.request_buffer());
      },
      /*data_tail=*/true);
  const auto answer = client.Call(kInsert, size, Soon(), {}, LocalClient::Layout::kDataTail);
  ProtoReader confirmed({reinterpret_cast<const uint8_t*>(answer.payload.data()), answer.payload.size()},
                        "InsertResponse");
  std::vector<uint64_t> keys;
  while (confirmed.Next()) confirmed.AppendVarints(keys);
  RESOUND_CHECK(keys == std::vector<uint64_t>{500});
  RESOUND_CHECK(fixture.table->Info().current_size == 21);
  const auto stored = fixture.store->Find(500);
  RESOUND_CHECK(stored && stored->data_size() == chunk->data_size() &&
                std::memcmp(stored->data(), chunk->data(), chunk->data_size()) == 0);

  // A plain InsertRequest (chunk_data inside) behind its size, and a data
  // tail after it: which payload is the chunk's?
  const auto other = AddChunk(*client_store, 501);
  encoder.Add("t", 501, 1.0, {{{{501, 0, 1}}, false}});
  std::string plain;
  encoder.TakeMessage(10, 1 << 20, [&](size_t bytes) {
    plain.resize(bytes);
    return plain.data();
  });
  const uint64_t plain_size = plain.size();
  std::memcpy(client.request_buffer(), &plain_size, sizeof plain_size);
  std::memcpy(client.request_buffer() + sizeof plain_size, plain.data(), plain.size());
  try {
    client.Call(kInsert, sizeof plain_size + plain.size() + 16, Soon(), {}, LocalClient::Layout::kDataTail);
    RESOUND_CHECK(false);
  } catch (const StatusError& error) {
    RESOUND_CHECK(error.code() == kInvalidArgument);
  }
  RESOUND_CHECK(!client.broken() && !fixture.store->Find(501) && fixture.table->Info().current_size == 21);

  // A message size past the request's end: the frame is malformed.
  const uint64_t too_long = 1 << 13;
  std::memcpy(client.request_buffer(), &too_long, sizeof too_long);
  RESOUND_CHECK(Throws<StatusError>(
      [&] { client.Call(kInsert, 64, Soon(), {}, LocalClient::Layout::kDataTail); }));
  RESOUND_CHECK(client.broken() && fixture.table->Info().current_size == 21);
}

// Large chunks of a client store with shareable payloads are built in the
// process's payload arena; an insert names them there (arena refs) and the
// server copies them, byte for byte, beside a small chunk that travels in
// the data tail. A ref outside the arena is refused before anything is
// stored, refs on a connection that sent no arena end it, and the arena
// takes the chunks' blocks back once the client lets go of them.
void InsertsNamingPayloadsInTheArena(const std::string& dir) {
  Fixture fixture(dir + "/arena.sock");
  PayloadArena* arena = PayloadArena::Process(64 << 20);
  RESOUND_CHECK(arena != nullptr && PayloadArena::Process(1 << 20) == arena);
  const size_t in_use = arena->bytes_in_use();
  auto client_store = std::make_shared<ChunkStore>(ChunkStore::kDefaultShards, Chunk::PayloadCopy::kCached, true);
  const auto make = [&](uint64_t key, int64_t steps) { return AddChunk(*client_store, key, steps); };
  std::shared_ptr<const Chunk> large = make(700, 400);  // 160 KB: in the arena
  std::shared_ptr<const Chunk> small = make(701, 4);    // 1.6 KB: in the data tail
  RESOUND_CHECK(arena->OffsetOf(large->data(), large->data_size()).has_value());
  RESOUND_CHECK(!arena->OffsetOf(small->data(), small->data_size()).has_value());
  RESOUND_CHECK(arena->bytes_in_use() > in_use);

  LocalClient client(fixture.server->path(), 1 << 20, 1 << 12, Soon());
  RESOUND_CHECK(client.AttachArena(*arena, Soon()) && client.arena() == arena);
  auto encoder = std::make_unique<InsertRequestEncoder>(client_store);
  encoder->Add("t", 700, 1.0, {{{{700, 0, 2}}, false}, {{{701, 1, 1}}, true}});
  size_t size = 0;
  const auto stage = [&](size_t bytes) {
    size = bytes;
    return reinterpret_cast<char*>(client.request_buffer());
  };
  std::vector<std::shared_ptr<const Chunk>> named = encoder->TakeMessage(10, 1 << 20, stage, true, arena);
  RESOUND_CHECK(named.size() == 1 && named[0] == large);
  RESOUND_CHECK(size < large->data_size());  // the large payload is named, not carried
  client.HoldUntilAnswered({named.begin(), named.end()});
  const auto answer = client.Call(kInsert, size, Soon(), {}, LocalClient::Layout::kDataTailArenaRefs);
  ProtoReader confirmed({reinterpret_cast<const uint8_t*>(answer.payload.data()), answer.payload.size()},
                        "InsertResponse");
  std::vector<uint64_t> keys;
  while (confirmed.Next()) confirmed.AppendVarints(keys);
  RESOUND_CHECK(keys == std::vector<uint64_t>{700});
  for (const auto& sent : {large, small}) {
    const auto stored = fixture.store->Find(sent->key());
    RESOUND_CHECK(stored && stored.get() != sent.get() && stored->data_size() == sent->data_size() &&
                  std::memcmp(stored->data(), sent->data(), sent->data_size()) == 0);
    RESOUND_CHECK(!arena->OffsetOf(stored->data(), stored->data_size()));  // the server's own copy
  }
  const int64_t items = fixture.table->Info().current_size;

  // A hand-made message whose ref points past the arena's end: refused,
  // nothing stored, the connection goes on.
  std::shared_ptr<const Chunk> third = make(702, 400);
  encoder->Add("t", 702, 1.0, {{{{702, 0, 1}}, false}});
  named = encoder->TakeMessage(10, 1 << 20, stage, true, arena);
  RESOUND_CHECK(named.size() == 1);
  uint64_t head = 0;
  std::memcpy(&head, client.request_buffer(), sizeof head);
  const uint64_t outside = arena->size() - 1000;
  std::memcpy(client.request_buffer() + sizeof head + head, &outside, sizeof outside);
  RESOUND_CHECK(Throws<StatusError>(
      [&] { client.Call(kInsert, size, Soon(), {}, LocalClient::Layout::kDataTailArenaRefs); }));
  RESOUND_CHECK(!client.broken() && !fixture.store->Find(702) && fixture.table->Info().current_size == items);

  // Arena refs from a connection that sent no arena: the connection ends.
  LocalClient plain(fixture.server->path(), 1 << 20, 1 << 12, Soon());
  std::memcpy(plain.request_buffer(), client.request_buffer(), size);
  RESOUND_CHECK(Throws<StatusError>(
      [&] { plain.Call(kInsert, size, Soon(), {}, LocalClient::Layout::kDataTailArenaRefs); }));
  RESOUND_CHECK(plain.broken() && !fixture.store->Find(702));

  // Answered (or refused) calls let go of what they held: once the client's
  // handles go too, so do the arena's blocks.
  encoder.reset();
  named.clear();
  large.reset();
  small.reset();
  third.reset();
  RESOUND_CHECK(arena->bytes_in_use() == in_use);

  // A call this side ends (Shutdown, as a cancelled stream does) keeps what
  // it named for good: the server may still be copying it.
  std::shared_ptr<const Chunk> last = make(703, 400);
  encoder = std::make_unique<InsertRequestEncoder>(client_store);
  encoder->Add("t", 703, 1.0, {{{{703, 0, 1}}, false}});
  named = encoder->TakeMessage(10, 1 << 20, stage, true, arena);
  RESOUND_CHECK(named.size() == 1);
  client.HoldUntilAnswered({named.begin(), named.end()});
  named.clear();
  client.Start(kInsert, size, LocalClient::Layout::kDataTailArenaRefs);
  client.Shutdown();
  RESOUND_CHECK(Throws<StatusError>([&] { client.Finish(Soon()); }));
  encoder.reset();
  RESOUND_CHECK(last.use_count() == 2);  // this handle and the client's
  const std::weak_ptr<const Chunk> watched = last;
  last.reset();
  RESOUND_CHECK(!watched.expired());
}

// A writer's turn on an insert stream (ExchangeInsert): each turn reads the
// answer it needs, confirms its items and sends the queued ones ahead; an
// answer held back by a rate limiter stays pending past the turn's
// deadline, on a connection that goes on (the next turn reads it).
void WritersExchangeInOneCall(const std::string& dir) {
  Fixture fixture(dir + "/exchange.sock");
  const auto queue = fixture.ServeQueue();
  auto client_store = std::make_shared<ChunkStore>();
  InsertRequestEncoder encoder(client_store);
  LocalClient client(fixture.server->path(), 1 << 12, 1 << 12, Soon());
  const auto chunk = AddChunk(*client_store, 800);
  const auto add = [&](const std::string& table, uint64_t key) {
    encoder.Add(table, key, 1.0, {{{{800, 0, 1}}, false}});
  };

  // Keep one: the first item is sent ahead, unanswered.
  add("t", 800);
  ExchangeOutcome outcome = ExchangeInsert(client, kInsert, encoder, 1, {}, Soon());
  RESOUND_CHECK(outcome.sent && outcome.awaiting && outcome.confirmed == 0);
  RESOUND_CHECK(encoder.in_flight() == 1 && encoder.queued() == 0);
  // The second: the first's answer read, the second sent ahead.
  add("t", 801);
  outcome = ExchangeInsert(client, kInsert, encoder, 1, {}, Soon());
  RESOUND_CHECK(outcome.sent && outcome.awaiting && outcome.confirmed == 1 && encoder.in_flight() == 1);
  // Keep none: the second's answer read, nothing left to send.
  outcome = ExchangeInsert(client, kInsert, encoder, 0, {}, Soon());
  RESOUND_CHECK(!outcome.sent && !outcome.awaiting && outcome.confirmed == 1 && encoder.in_flight() == 0);
  RESOUND_CHECK(fixture.table->Info().current_size == 22 && fixture.store->Find(800));
  // Nothing in flight: a turn does nothing.
  outcome = ExchangeInsert(client, kInsert, encoder, 0, {}, Soon());
  RESOUND_CHECK(!outcome.sent && !outcome.awaiting && outcome.confirmed == 0);

  // A full queue lets the first item in and holds the second back: the
  // answer comes in parts, the rest is asked for and stays pending past
  // the deadline, on a usable connection.
  add("queue", 802);
  add("queue", 803);
  outcome = ExchangeInsert(client, kInsert, encoder, 0, {}, Deadline::AfterSeconds(0.05));
  RESOUND_CHECK(outcome.sent && outcome.awaiting && outcome.confirmed == 1 && !client.broken());
  RESOUND_CHECK(queue->Info().current_size == 1 && encoder.in_flight() == 1);
  // A sample makes room: the next turn reads the rest.
  RESOUND_CHECK(queue->Sample(1, Soon()).size() == 1);
  outcome = ExchangeInsert(client, kInsert, encoder, 0, {}, Soon());
  RESOUND_CHECK(!outcome.sent && !outcome.awaiting && outcome.confirmed == 1 && encoder.in_flight() == 0);
  RESOUND_CHECK(queue->Info().current_size == 1);
}

// client.insert's one-step request: its items go into both tables, their
// chunks hold the bytes sent, and the connection's session lets the chunks
// go in the same message (a reset then frees them); a field whose bytes do
// not match its shape is refused before anything is written.
void StepInsertsLeaveNothingInTheSession(const std::string& dir) {
  Fixture fixture(dir + "/step.sock");
  LocalClient client(fixture.server->path(), 1 << 12, 1 << 12, Soon());
  std::vector<float> obs(kWidth);
  for (size_t i = 0; i < obs.size(); ++i) obs[i] = static_cast<float>(i) + 0.5F;
  const int64_t action = 3;
  const StepInsertRequest request({{.key = 900, .dtype = DType::Parse("<f4"), .shape = {kWidth},
                                    .data = std::as_bytes(std::span(obs))},
                                   {.key = 901, .dtype = DType::Parse("<i8"), .shape = {},
                                    .data = std::as_bytes(std::span(&action, 1))}},
                                  /*episode_id=*/77, {{"t", 910, 2.0}, {"ragged", 911, 1.0}});
  RESOUND_CHECK(request.bytes() <= client.request_capacity());
  request.Write({client.request_buffer(), request.bytes()});
  std::vector<uint64_t> keys;
  LocalClient::Response answer =
      client.Call(kInsertStep, request.bytes(), Soon(), {}, LocalClient::Layout::kDataTail);
  while (true) {
    ProtoReader confirmed({reinterpret_cast<const uint8_t*>(answer.payload.data()), answer.payload.size()},
                          "InsertResponse");
    while (confirmed.Next()) confirmed.AppendVarints(keys);
    if (!answer.more) break;
    answer = client.Continue(Soon());
  }
  RESOUND_CHECK((keys == std::vector<uint64_t>{910, 911}));
  RESOUND_CHECK(fixture.table->Info().current_size == 21 && fixture.ragged->Info().current_size == 5);
  const auto chunk = fixture.store->Find(900);
  RESOUND_CHECK(chunk && chunk->num_steps() == 1 && chunk->episode_id() == 77 &&
                chunk->data_size() == obs.size() * sizeof(float) &&
                std::memcmp(chunk->data(), obs.data(), chunk->data_size()) == 0);
  const auto scalar = fixture.store->Find(901);
  RESOUND_CHECK(scalar && scalar->step_shape().empty() && std::memcmp(scalar->data(), &action, sizeof action) == 0);
  fixture.table->Reset();
  fixture.ragged->Reset();
  RESOUND_CHECK(chunk.use_count() == 1 && scalar.use_count() == 1);  // only these handles: the session let go

  RESOUND_CHECK(Throws<InvalidArgumentError>([&] {
    StepInsertRequest({{.key = 1, .dtype = DType::Parse("<f4"), .shape = {kWidth + 1},
                        .data = std::as_bytes(std::span(obs))}},
                      0, {{"t", 2, 1.0}});
  }));
}

// A step whose items a rate limiter holds up: the items before go in at
// once and are confirmed in a first part, the rest once a sample makes
// room, in order; the session holds the step's chunks until the last item
// is in and lets them go then.
void StepInsertsHeldUpGoOnWhenThereIsRoom(const std::string& dir) {
  Fixture fixture(dir + "/held.sock");
  const auto queue = fixture.ServeQueue();
  LocalClient client(fixture.server->path(), 1 << 12, 1 << 12, Soon());
  const std::vector<float> obs(kWidth, 2.0F);
  const StepInsertRequest request(
      {{.key = 940, .dtype = DType::Parse("<f4"), .shape = {kWidth}, .data = std::as_bytes(std::span(obs))}},
      /*episode_id=*/5, {{"t", 950, 1.0}, {"queue", 951, 1.0}, {"queue", 952, 1.0}, {"t", 953, 1.0}});
  request.Write({client.request_buffer(), request.bytes()});
  const auto confirmed = [](const LocalClient::Response& answer) {
    std::vector<uint64_t> keys;
    ProtoReader reader({reinterpret_cast<const uint8_t*>(answer.payload.data()), answer.payload.size()},
                       "InsertResponse");
    while (reader.Next()) reader.AppendVarints(keys);
    return keys;
  };
  LocalClient::Response answer =
      client.Call(kInsertStep, request.bytes(), Soon(), {}, LocalClient::Layout::kDataTail);
  RESOUND_CHECK(answer.more && (confirmed(answer) == std::vector<uint64_t>{950, 951}));
  RESOUND_CHECK(fixture.table->Info().current_size == 21 && queue->Info().current_size == 1);
  const auto chunk = fixture.store->Find(940);
  RESOUND_CHECK(chunk != nullptr);
  // A sample makes room: the rest of the step goes in.
  RESOUND_CHECK(queue->Sample(1, Soon()).size() == 1);
  std::vector<uint64_t> rest;
  do {
    answer = client.Continue(Soon());
    for (const uint64_t key : confirmed(answer)) rest.push_back(key);
  } while (answer.more);
  RESOUND_CHECK((rest == std::vector<uint64_t>{952, 953}));
  RESOUND_CHECK(fixture.table->Info().current_size == 22 && queue->Info().current_size == 1);
  fixture.table->Reset();
  queue->Reset();
  RESOUND_CHECK(chunk.use_count() == 1);  // the session let go of it
}

// Clients sampling and updating priorities at once while items go in and
// out of the table (for the sanitizers).
void ManyClientsAtOnce(const std::string& dir) {
  Fixture fixture(dir + "/many.sock");
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < 3; ++c) {
    threads.emplace_back([&, c] {
      LocalClient client(fixture.server->path(), 1 << 12, 1 << 14, Soon());
      for (int i = 0; i < 150; ++i) {
        SampleGatheredAndCheck(client, 1 + (i + c) % 12);
        const uint64_t key = 1 + static_cast<uint64_t>(i % 20);
        client.Call(kMutatePriorities, PutMutateRequest(client, "t", {key}, {1.0 + i % 3}, {}), Soon());
      }
    });
  }
  threads.emplace_back([&] {
    for (uint64_t key = 1000; !stop.load(); ++key) {
      InsertItem(*fixture.table, *fixture.store, key);  // the Fifo remover lets the oldest go
      if (key % 50 == 0) std::this_thread::yield();
    }
  });
  for (int c = 0; c < 3; ++c) threads[c].join();
  stop = true;
  threads.back().join();
}

}  // namespace
}  // namespace resound::local

int main() {
  std::string dir = "/tmp/resound-replay-local-test-XXXXXX";
  RESOUND_CHECK(::mkdtemp(dir.data()) != nullptr);
  resound::local::GatheredBatchesCarryEveryByte(dir);
  resound::local::BatchesGoIntoTheClientsRegion(dir);
  resound::local::MutatePrioritiesInCpp(dir);
  resound::local::InsertsWithADataTail(dir);
  resound::local::StepInsertsLeaveNothingInTheSession(dir);
  resound::local::StepInsertsHeldUpGoOnWhenThereIsRoom(dir);
  resound::local::WritersExchangeInOneCall(dir);
  resound::local::InsertsNamingPayloadsInTheArena(dir);
  resound::local::RegionsGrowOnlyUpToTheLimit(dir);
  resound::local::ManyClientsAtOnce(dir);
  ::rmdir(dir.c_str());
  return 0;
}

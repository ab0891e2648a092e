// The pieces the gRPC service uses to carry many items per message:
// packing trajectories (given directly and read back from items) must give
// back the same trajectories, inconsistent arrays from a client must be
// refused, a holder must own exactly the chunks it holds and refuse items
// that use any other, and the wire reader must find what the writer wrote and
// refuse every cut or malformed message (its input comes from the network).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "check.h"
#include "resound/chunk_holder.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/item.h"
#include "resound/packed_trajectories.h"
#include "resound/proto_reader.h"
#include "resound/proto_writer.h"
#include "resound/wire_messages.h"

namespace resound {
namespace {

std::shared_ptr<const Chunk> AddChunk(ChunkStore& store, uint64_t key, int64_t num_steps) {
  ChunkMetadata m;
  m.key = key;
  m.num_steps = num_steps;
  m.end_step = num_steps - 1;
  m.uncompressed_size = Chunk::RawSize(m);
  std::vector<std::byte> payload(static_cast<size_t>(m.uncompressed_size), std::byte{7});
  return store.Insert(m, payload);
}

void PackingRoundTrips() {
  const std::vector<Trajectory> trajectories = {
      {{{{10, 1, 2}, {11, 0, 3}}, false}, {{{12, 0, 1}}, true}},
      {{{{11, 2, 1}}, true}},
      {{{{10, 0, 5}}, false}, {{{11, 0, 1}, {12, 1, 1}, {10, 2, 2}}, false}, {{{12, 0, 1}}, true}},
  };
  PackedTrajectories packed;
  for (const auto& trajectory : trajectories) packed.Append(trajectory);
  RESOUND_CHECK(packed.size() == 3);
  RESOUND_CHECK((packed.num_columns() == std::vector<uint32_t>{2, 1, 3}));
  RESOUND_CHECK((packed.num_slices() == std::vector<uint32_t>{2, 1, 1, 1, 3, 1}));
  for (size_t i = 0; i < trajectories.size(); ++i) RESOUND_CHECK(packed.Get(i) == trajectories[i]);

  // What a receiver rebuilds from the arrays is the same again.
  const PackedTrajectories received(packed.num_columns(), packed.num_slices(), packed.squeeze(),
                                    packed.chunk_keys(), packed.offsets(), packed.lengths());
  for (size_t i = 0; i < trajectories.size(); ++i) RESOUND_CHECK(received.Get(i) == trajectories[i]);

  // Items' own trajectories pack the same as the trajectories they came from.
  ChunkStore store;
  auto a = AddChunk(store, 10, 5);
  auto b = AddChunk(store, 11, 4);
  auto c = AddChunk(store, 12, 2);
  PackedTrajectories from_items;
  for (size_t i = 0; i < trajectories.size(); ++i) {
    from_items.Append(Item::Create(100 + i, trajectories[i], store)->trajectory());
  }
  for (size_t i = 0; i < trajectories.size(); ++i) RESOUND_CHECK(from_items.Get(i) == trajectories[i]);
}

void InconsistentArraysAreRefused() {
  const auto build = [](std::vector<uint32_t> columns, std::vector<uint32_t> slices, std::vector<uint8_t> squeeze,
                        size_t num_slices) {
    return [=] {
      PackedTrajectories(columns, slices, squeeze, std::vector<uint64_t>(num_slices, 1),
                         std::vector<int64_t>(num_slices, 0), std::vector<int64_t>(num_slices, 1));
    };
  };
  RESOUND_CHECK(!Throws<InvalidArgumentError>(build({1, 2}, {1, 1, 2}, {0, 0, 1}, 4)));
  RESOUND_CHECK(Throws<InvalidArgumentError>(build({1, 2}, {1, 1}, {0, 0}, 2)));        // too few columns
  RESOUND_CHECK(Throws<InvalidArgumentError>(build({1, 2}, {1, 1, 2}, {0, 0}, 4)));     // squeeze short
  RESOUND_CHECK(Throws<InvalidArgumentError>(build({1, 2}, {1, 1, 2}, {0, 0, 1}, 3)));  // slices short
  RESOUND_CHECK(Throws<InvalidArgumentError>(build({1, 2}, {1, 1, 2}, {0, 0, 1}, 5)));  // slices long
  // Counts near 2**32 must not wrap around into a plausible total.
  RESOUND_CHECK(Throws<InvalidArgumentError>(build({0xFFFFFFFFu, 2}, {1}, {0}, 1)));
  RESOUND_CHECK(Throws<InvalidArgumentError>([] {
    PackedTrajectories({1}, {2}, {0}, {1, 2}, {0}, {1, 1});  // offsets short
  }));
}

void HolderOwnsWhatItHolds() {
  ChunkStore store;
  ChunkHolder holder;
  holder.Hold(AddChunk(store, 10, 3));
  holder.Hold(AddChunk(store, 11, 3));
  RESOUND_CHECK(holder.size() == 2 && holder.Holds(10) && holder.Holds(11) && !holder.Holds(12));
  RESOUND_CHECK(store.num_chunks() == 2);  // alive only through the holder

  const Trajectory uses_held = {{{{10, 0, 2}, {11, 1, 1}}, false}};
  const Trajectory uses_other = {{{{10, 0, 1}}, false}, {{{12, 0, 1}}, true}};
  RESOUND_CHECK(!Throws<InvalidArgumentError>([&] { holder.CheckHolds(1, uses_held); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { holder.CheckHolds(2, uses_other); }));

  // An item keeps its chunk after the holder lets go; the other one goes.
  auto item = Item::Create(1, uses_held, store);
  holder.Release(10);
  holder.Release(11);
  holder.Release(99);  // not held: nothing happens
  RESOUND_CHECK(holder.size() == 0 && !holder.Holds(10));
  RESOUND_CHECK(store.num_chunks() == 2);
  item.reset();
  RESOUND_CHECK(store.num_chunks() == 0);
}

std::span<const uint8_t> Bytes(const std::string& data) {
  return {reinterpret_cast<const uint8_t*>(data.data()), data.size()};
}

void ReaderFindsWhatTheWriterWrote() {
  ProtoWriter message;
  message.VarintField(1, ~uint64_t{0});  // ten bytes
  message.BytesField(3, "first");
  message.PackedVarints(2, std::vector<int64_t>{-1, 0, 300});
  message.PackedDoubles(5, std::vector<double>{0.5, 2.0});
  ProtoWriter nested;
  nested.BytesField(3, "inside");  // field 3 of another message: not top level
  message.MessageField(4, nested);
  message.BytesField(3, "last");
  const std::string& data = message.data();

  const auto found = FindLengthDelimitedField(Bytes(data), 3);
  RESOUND_CHECK(found.has_value());
  RESOUND_CHECK(found->field_end == data.size());  // the last one wins
  RESOUND_CHECK(data.substr(found->value_start, found->field_end - found->value_start) == "last");
  RESOUND_CHECK(data.substr(found->field_start, 2) == std::string("\x1a\x04", 2));
  RESOUND_CHECK(!FindLengthDelimitedField(Bytes(data), 7).has_value());
  RESOUND_CHECK(!FindLengthDelimitedField(Bytes(data), 1).has_value());  // a varint, not bytes
  RESOUND_CHECK(!FindLengthDelimitedField(Bytes(std::string()), 3).has_value());

  // A cut at a field boundary is a shorter valid message; a cut inside a
  // field is refused. Either way nothing beyond the cut is read.
  size_t refused = 0;
  for (size_t size = 1; size < data.size(); ++size) {
    try {
      const auto in_cut = FindLengthDelimitedField(Bytes(data.substr(0, size)), 3);
      RESOUND_CHECK(!in_cut || in_cut->field_end <= size);
    } catch (const InvalidArgumentError&) {
      ++refused;
    }
  }
  RESOUND_CHECK(refused >= data.size() - 1 - 6);  // all but the cuts at the 6 field boundaries
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] {
    FindLengthDelimitedField(Bytes(data.substr(0, data.size() - 2)), 3);  // inside "last"
  }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([] {
    FindLengthDelimitedField(Bytes(std::string(11, '\xff')), 3);  // a varint of eleven bytes
  }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([] {
    FindLengthDelimitedField(Bytes(std::string("\x0b\x00", 2)), 3);  // a group
  }));
  ProtoWriter huge_length;
  huge_length.Tag(3, ProtoWriter::kLengthDelimited);
  huge_length.Varint(~uint64_t{0});
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { FindLengthDelimitedField(Bytes(huge_length.data()), 3); }));
}

// A data tail with arena refs: each chunk's payload from the arena or from
// the data after the table, in order; a short table, a range outside the
// arena (also one whose end would wrap), a payload past the data's end,
// bytes left over and payloads past what one request may bring are refused.
void ArenaRefsPointIntoTheArenaOrTheData() {
  std::vector<std::byte> arena(1000);
  for (size_t i = 0; i < arena.size(); ++i) arena[i] = std::byte(i & 0xff);
  const auto tail = [](std::vector<uint64_t> refs, size_t data_bytes) {
    std::vector<std::byte> out(refs.size() * 8 + data_bytes, std::byte{7});
    std::memcpy(out.data(), refs.data(), refs.size() * 8);
    return out;
  };
  constexpr uint64_t kData = wire::kPayloadInData;
  const std::vector<std::byte> good = tail({100, kData, 990}, 5);
  const auto payloads = wire::PayloadsWithArenaRefs({1, 2, 3}, {20, 5, 10}, good, arena, 35);
  RESOUND_CHECK(payloads.size() == 3);
  RESOUND_CHECK(payloads[0].data() == arena.data() + 100 && payloads[0].size() == 20);
  RESOUND_CHECK(payloads[1].data() == good.data() + 24 && payloads[1].size() == 5);
  RESOUND_CHECK(payloads[2].data() == arena.data() + 990 && payloads[2].size() == 10);
  const auto refused = [&](std::vector<int64_t> sizes, const std::vector<std::byte>& data, uint64_t max = 1 << 20) {
    const std::vector<uint64_t> keys(sizes.size(), 9);
    return Throws<InvalidArgumentError>([&] { wire::PayloadsWithArenaRefs(keys, sizes, data, arena, max); });
  };
  RESOUND_CHECK(refused({20, 5, 10}, good, 34));                      // more than a request may bring
  RESOUND_CHECK(refused({500, 500}, tail({0, 0}, 0), 999));           // the same range twice counts twice
  RESOUND_CHECK(Throws<InvalidArgumentError>(
      [&] { wire::PayloadsWithArenaRefs({1, 2}, {20, 5, 10}, good, arena, 1 << 20); }));  // keys short
  RESOUND_CHECK(refused({20, 5, 10}, tail({100, kData}, 5)));         // table short
  RESOUND_CHECK(refused({20}, tail({995}, 0)));                       // past the arena's end
  RESOUND_CHECK(refused({20}, tail({~uint64_t{0} - 1}, 0)));          // far past it
  RESOUND_CHECK(refused({20}, tail({1001}, 0)));                      // starts past it
  RESOUND_CHECK(refused({6}, tail({kData}, 5)));                      // data short
  RESOUND_CHECK(refused({5}, tail({kData}, 6)));                      // data left over
  RESOUND_CHECK(refused({-1}, tail({0}, 0)));                         // negative size
  RESOUND_CHECK(!refused({0, 0}, tail({1000, kData}, 0)));            // empty payloads
}

}  // namespace
}  // namespace resound

int main() {
  resound::PackingRoundTrips();
  resound::InconsistentArraysAreRefused();
  resound::HolderOwnsWhatItHolds();
  resound::ReaderFindsWhatTheWriterWrote();
  resound::ArenaRefsPointIntoTheArenaOrTheData();
  std::puts("wire_packing_test: ok");
  return 0;
}

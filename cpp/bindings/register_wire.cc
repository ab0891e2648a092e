// What the gRPC service needs from the core to carry many chunks and items per
// message as flat arrays: resound._core.ChunkHolder, PackedTrajectories,
// InsertRequestEncoder and decode_sample_response. Each call handles a whole
// message, so the per-item work of the service runs here rather than in
// Python.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <utility>
#include <vector>

#include "buffer_view.h"
#include "conversions.h"
#include "register.h"
#include "resound/chunk.h"
#include "resound/chunk_holder.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/insert_request.h"
#include "resound/insert_request_encoder.h"
#include "resound/packed_trajectories.h"
#include "resound/proto_reader.h"
#include "resound/proto_writer.h"
#include "resound/sample_response.h"
#include "resound/wire_messages.h"

namespace resound::bindings {
namespace {

template <typename T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

// A numpy array copied from `values`.
template <typename T>
py::array_t<T> NumpyOf(const std::vector<T>& values) {
  py::array_t<T> out(static_cast<py::ssize_t>(values.size()));
  if (!values.empty()) std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(T));
  return out;
}

// A bool array of flags that are each 0 or 1 (as ProtoReader reads them),
// copied byte for byte.
py::array_t<bool> BoolsOf(const std::vector<uint8_t>& flags) {
  static_assert(sizeof(bool) == 1, "a bool is one byte");
  py::array_t<bool> out(static_cast<py::ssize_t>(flags.size()));
  if (!flags.empty()) std::memcpy(out.mutable_data(), flags.data(), flags.size());
  return out;
}

template <typename T>
std::vector<T> ToVector(const Array<T>& array, const char* argument) {
  if (array.ndim() != 1) throw InvalidArgumentError(std::string(argument) + " must be one-dimensional");
  return std::vector<T>(array.data(), array.data() + array.size());
}

// A layout as (dtype, shape, compression, delta_encoded): the metadata a
// batch's chunks share.
ChunkMetadata ParseLayout(py::handle layout, size_t index) {
  const std::string where = "layouts[" + std::to_string(index) + "]";
  if (!py::isinstance<py::sequence>(layout) || py::len(layout) != 4) {
    throw InvalidArgumentError(where + " must be (dtype, shape, compression, delta_encoded)");
  }
  const auto fields = py::reinterpret_borrow<py::sequence>(layout);
  ChunkMetadata metadata;
  try {
    metadata.dtype = DType::Parse(py::cast<std::string>(fields[0]));
    metadata.step_shape = py::cast<std::vector<int64_t>>(fields[1]);
    metadata.compression = ParseCompression(py::cast<std::string>(fields[2]));
    metadata.delta_encoded = py::cast<bool>(fields[3]);
  } catch (const py::cast_error&) {
    throw InvalidArgumentError(where + " must be (dtype: str, shape: ints, compression: str, delta_encoded: bool)");
  } catch (const InvalidArgumentError& error) {
    throw InvalidArgumentError(where + ": " + error.what());  // which layout of the batch
  }
  return metadata;
}

void AddChunks(ChunkHolder& holder, ChunkStore& store, const py::sequence& layouts, const Array<uint64_t>& keys,
               const Array<uint32_t>& layout_indices, const Array<int64_t>& num_steps,
               const Array<uint64_t>& episode_ids, const Array<int64_t>& start_steps,
               const Array<int64_t>& end_steps, const Array<int64_t>& data_sizes, py::handle data) {
  wire::ChunkBatchMessage batch;
  batch.layouts.reserve(layouts.size());
  for (size_t i = 0; i < layouts.size(); ++i) batch.layouts.push_back(ParseLayout(layouts[i], i));
  batch.keys = ToVector(keys, "keys");
  batch.layout_indices = ToVector(layout_indices, "layout_indices");
  batch.num_steps = ToVector(num_steps, "num_steps");
  batch.episode_ids = ToVector(episode_ids, "episode_ids");
  batch.start_steps = ToVector(start_steps, "start_steps");
  batch.end_steps = ToVector(end_steps, "end_steps");
  batch.data_sizes = ToVector(data_sizes, "data_sizes");
  const BufferView payload(data);
  std::vector<std::shared_ptr<const Chunk>> made;
  {
    std::optional<py::gil_scoped_release> release;
    if (payload.size() > kKeepGilBelowBytes) release.emplace();
    made = wire::MakeChunks(batch, {static_cast<const std::byte*>(payload.data()), payload.size()}, store);
  }
  for (auto& chunk : made) holder.Hold(std::move(chunk));
}

// (packed trajectories, keys, priorities, times_sampled, probabilities,
// table_sizes, rate_limited) of a serialized SampleResponse, its chunks added
// to `store` and `holder`.
py::tuple DecodeSampleResponse(py::handle message, ChunkStore& store, ChunkHolder& holder) {
  const BufferView view(message);
  SampleResponseItems items;
  {
    // The buffer is the caller's immutable bytes (BufferView holds it).
    py::gil_scoped_release release;
    items = ReadSampleResponse({static_cast<const uint8_t*>(view.data()), view.size()}, store, holder);
  }
  auto packed = std::make_shared<PackedTrajectories>(std::move(items.trajectories));
  return py::make_tuple(std::move(packed), NumpyOf(items.keys), NumpyOf(items.priorities),
                        NumpyOf(items.times_sampled), NumpyOf(items.probabilities), NumpyOf(items.table_sizes),
                        BoolsOf(items.rate_limited), items.end_of_request, items.timed_out,
                        // A server's text: bad UTF-8 is replaced, never an error.
                        py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(
                            items.timeout_reason.data(), static_cast<Py_ssize_t>(items.timeout_reason.size()),
                            "replace")));
}

// A serialized SampleRequest: what Client.sample sends for each batch over
// the same-host transport, where building it with the protobuf runtime
// took a tenth of a sample of one.
py::bytes EncodeSampleRequest(const std::string& table, int64_t num_samples, double timeout_seconds) {
  namespace f = wire::sample_request;
  ProtoWriter message;
  message.BytesField(f::kTable, table);
  message.VarintField(f::kNumSamples, static_cast<uint64_t>(num_samples));
  message.DoubleField(f::kTimeoutSeconds, timeout_seconds);
  return py::bytes(message.data());
}

// A received InsertRequest as the server handles it (resound._core.InsertRequest):
// read once by the core, its chunk payloads left in the message, which it
// keeps alive.
class ReceivedInsert {
 public:
  explicit ReceivedInsert(py::handle raw) : raw_(py::reinterpret_borrow<py::object>(raw)), view_(raw) {
    message_ = ReadInsertRequest({static_cast<const uint8_t*>(view_.data()), view_.size()});
    keys_ = NumpyOf(message_.keys);
    priorities_ = NumpyOf(message_.priorities);
    trajectories_ = std::make_shared<PackedTrajectories>(std::move(message_.trajectories));
  }

  // Payload bytes of the chunks that `store` does not hold yet (a chunk sent
  // again, after a reconnect, is stored once and brings nothing new).
  int64_t NewChunkBytes(const ChunkStore& store) const {
    const auto& chunks = message_.chunks;
    int64_t bytes = 0;
    for (size_t i = 0; i < chunks.keys.size() && i < chunks.data_sizes.size(); ++i) {
      if (!store.Find(chunks.keys[i])) bytes += chunks.data_sizes[i];
    }
    return bytes;
  }

  void AddChunks(ChunkHolder& holder, ChunkStore& store) const {
    if (message_.chunks.keys.empty() && message_.chunk_data.empty()) return;
    std::vector<std::shared_ptr<const Chunk>> made;
    {
      std::optional<py::gil_scoped_release> release;
      if (message_.chunk_data.size() > kKeepGilBelowBytes) release.emplace();
      made = wire::MakeChunks(message_.chunks, message_.chunk_data, store);
    }
    for (auto& chunk : made) holder.Hold(std::move(chunk));
  }

  void Release(ChunkHolder& holder) const noexcept {
    for (const uint64_t key : message_.release_chunk_keys) holder.Release(key);
  }

  py::list Runs() const {
    py::list runs;
    for (const TableRun& run : message_.runs) {
      runs.append(py::make_tuple(message_.tables[run.table], run.begin, run.end));
    }
    return runs;
  }

  // A serialized InsertResponse confirming items [begin, end).
  py::bytes Confirmation(size_t begin, size_t end) const {
    if (begin > end || end > message_.keys.size()) throw InvalidArgumentError("confirmation: bad range");
    ProtoWriter response;
    response.PackedVarints(wire::insert_response::kItemKeys,
                           std::vector<uint64_t>(message_.keys.begin() + static_cast<std::ptrdiff_t>(begin),
                                                 message_.keys.begin() + static_cast<std::ptrdiff_t>(end)));
    return py::bytes(response.data());
  }

  const py::array_t<uint64_t>& keys() const noexcept { return keys_; }
  const py::array_t<double>& priorities() const noexcept { return priorities_; }
  const std::shared_ptr<PackedTrajectories>& trajectories() const noexcept { return trajectories_; }
  size_t num_items() const noexcept { return message_.keys.size(); }
  bool has_releases() const noexcept { return !message_.release_chunk_keys.empty(); }

 private:
  py::object raw_;   // owns the bytes `view_` (and so chunk_data) points into
  BufferView view_;
  InsertRequestMessage message_;
  py::array_t<uint64_t> keys_;
  py::array_t<double> priorities_;
  std::shared_ptr<PackedTrajectories> trajectories_;
};

// The item keys of a serialized InsertResponse.
py::array_t<uint64_t> InsertResponseKeys(py::handle message) {
  const BufferView view(message);
  return NumpyOf(wire::ReadInsertResponseKeys({static_cast<const uint8_t*>(view.data()), view.size()}));
}

// A MutatePrioritiesRequest's repeated fields from the API's forms (see
// ToUpdates), checked as every transport checks them, as Python lists.
py::tuple PriorityUpdates(const py::object& updates, const py::object& deletes) {
  py::list keys;
  py::list priorities;
  if (!updates.is_none()) {
    for (const auto& [key, priority] : ToUpdates(updates)) {
      keys.append(key);
      priorities.append(priority);
    }
  }
  py::list delete_keys;
  if (!deletes.is_none()) {
    for (const uint64_t key : ToKeys(deletes, "deletes key")) delete_keys.append(key);
  }
  return py::make_tuple(std::move(keys), std::move(priorities), std::move(delete_keys));
}

// FindLengthDelimitedField of a Python buffer, as (field_start, field_end,
// value_start) or None.
py::object FindBytesField(py::handle message, uint32_t field_number) {
  const BufferView view(message);
  const auto found = FindLengthDelimitedField({static_cast<const uint8_t*>(view.data()), view.size()}, field_number);
  if (!found) return py::none();
  return py::make_tuple(found->field_start, found->field_end, found->value_start);
}

// What add and add_one return: 0 without room (the writer waits for
// confirmations before its next item), 1 with room, 2 with room and a
// message due (a writer sends it itself). One call per item answers both.
int AddOutcome(const InsertRequestEncoder& encoder) noexcept {
  if (!encoder.HasRoom()) return 0;
  return encoder.MessageDue() ? 2 : 1;
}

}  // namespace

void RegisterWire(py::module_& m) {
  py::class_<ChunkHolder, std::shared_ptr<ChunkHolder>>(m, "ChunkHolder", R"doc(
The chunks one insert stream has sent and not released: they stay alive for
the stream's later items, and an item may only use chunks its stream holds.
Not thread-safe (one stream, one thread).
)doc")
      .def(py::init<>())
      .def("add", &AddChunks, py::arg("store"), py::arg("layouts"), py::arg("keys"), py::arg("layout_indices"),
           py::arg("num_steps"), py::arg("episode_ids"), py::arg("start_steps"), py::arg("end_steps"),
           py::arg("data_sizes"), py::arg("data"), R"doc(
Adds a batch of chunks (parallel arrays; payloads back to back in `data`) to
`store` and holds them. ValueError names the first invalid chunk; nothing
is held then.)doc")
      .def(
          "release",
          [](ChunkHolder& holder, const Array<uint64_t>& keys) {
            for (py::ssize_t i = 0; i < keys.size(); ++i) holder.Release(keys.data()[i]);
          },
          py::arg("keys"))
      .def("get", [](const ChunkHolder& holder, py::handle key) {
        auto chunk = holder.Find(ToKey(key, "key"));
        if (!chunk) throw NotFoundError("chunk " + std::to_string(ToKey(key, "key")) + " is not held");
        return Hold(std::move(chunk));
      })
      .def("__len__", &ChunkHolder::size)
      .def("__contains__", [](const ChunkHolder& holder, py::handle key) {
        uint64_t parsed = 0;
        return ParseKey(key, parsed) && holder.Holds(parsed);
      });

  py::class_<PackedTrajectories, std::shared_ptr<PackedTrajectories>>(m, "PackedTrajectories", R"doc(
Trajectories of many items as flat arrays (num_columns per item; num_slices
and squeeze per column; chunk_keys, offsets, lengths per slice), as the gRPC
service carries them.
)doc")
      .def(py::init([](const Array<uint32_t>& num_columns, const Array<uint32_t>& num_slices,
                       const Array<bool>& squeeze, const Array<uint64_t>& chunk_keys, const Array<int64_t>& offsets,
                       const Array<int64_t>& lengths) {
             auto flags = ToVector(squeeze, "squeeze");
             return std::make_shared<PackedTrajectories>(
                 ToVector(num_columns, "num_columns"), ToVector(num_slices, "num_slices"),
                 std::vector<uint8_t>(flags.begin(), flags.end()), ToVector(chunk_keys, "chunk_keys"),
                 ToVector(offsets, "offsets"), ToVector(lengths, "lengths"));
           }),
           py::arg("num_columns"), py::arg("num_slices"), py::arg("squeeze"), py::arg("chunk_keys"),
           py::arg("offsets"), py::arg("lengths"))
      .def("__len__", &PackedTrajectories::size)
      .def(
          "unpack",
          [](const PackedTrajectories& packed, const ChunkHolder& holder) {
            py::list out;
            for (size_t i = 0; i < packed.size(); ++i) {
              const Trajectory trajectory = packed.Get(i);
              py::list columns, chunks;
              std::vector<uint64_t> seen;
              for (const TrajectoryColumn& column : trajectory) {
                py::list slices;
                for (const ChunkSlice& slice : column.slices) {
                  slices.append(py::make_tuple(slice.chunk_key, slice.offset, slice.length));
                  if (std::find(seen.begin(), seen.end(), slice.chunk_key) != seen.end()) continue;
                  auto chunk = holder.Find(slice.chunk_key);
                  if (!chunk) {
                    throw InvalidArgumentError("trajectory " + std::to_string(i) + " uses chunk " +
                                               std::to_string(slice.chunk_key) + ", which was not sent with it");
                  }
                  seen.push_back(slice.chunk_key);
                  chunks.append(Hold(std::move(chunk)));
                }
                columns.append(py::make_tuple(std::move(slices), column.squeeze));
              }
              out.append(py::make_tuple(std::move(columns), std::move(chunks)));
            }
            return out;
          },
          py::arg("holder"),
          "(trajectory, chunks) of every item, the chunks taken from `holder`.");

  py::class_<InsertRequestEncoder, std::shared_ptr<InsertRequestEncoder>>(m, "InsertRequestEncoder", R"doc(
The client end of an insert stream: queued items, written into serialized
InsertRequest messages by the thousand, held until the server confirms them
(each holds its chunks). Not thread-safe.
)doc")
      .def(py::init([](std::shared_ptr<ChunkStore> store, size_t max_in_flight_items, int64_t max_in_flight_bytes) {
             return std::make_shared<InsertRequestEncoder>(std::move(store), max_in_flight_items,
                                                           max_in_flight_bytes);
           }),
           py::arg("store"), py::arg("max_in_flight_items") = 0, py::arg("max_in_flight_bytes") = 0,
           "Limits (0: none) for has_room, which add and add_one return.")
      .def(
          "add",
          [](InsertRequestEncoder& encoder, const std::string& table, py::handle key, double priority,
             py::handle trajectory) {
            encoder.Add(table, ToKey(key, "key"), priority, ToTrajectory(trajectory, "trajectory"));
            return AddOutcome(encoder);
          },
          py::arg("table"), py::arg("key"), py::arg("priority"), py::arg("trajectory"),
          "Queues an item (trajectory as Table.insert takes it); NotFoundError if a chunk is not live. "
          "Returns 0 without room (has_room), 1 with room, 2 with room and a message due (message_due).")
      .def(
          "add_one",
          [](InsertRequestEncoder& encoder, const std::string& table, py::handle key, double priority,
             py::handle chunk_key, int64_t offset, int64_t length, bool squeeze) {
            Trajectory trajectory;
            trajectory.push_back({{{ToKey(chunk_key, "chunk_key"), offset, length}}, squeeze});
            encoder.Add(table, ToKey(key, "key"), priority, std::move(trajectory));
            return AddOutcome(encoder);
          },
          py::arg("table"), py::arg("key"), py::arg("priority"), py::arg("chunk_key"), py::arg("offset"),
          py::arg("length"), py::arg("squeeze"),
          "add() of one column of one slice, without the nested lists; returns as add.")
      .def(
          "take_message",
          [](InsertRequestEncoder& encoder, size_t max_items, size_t max_bytes) {
            py::bytes out;
            encoder.TakeMessage(max_items, max_bytes, [&out](size_t size) {
              out = py::bytes(nullptr, static_cast<py::ssize_t>(size));
              return PyBytes_AS_STRING(out.ptr());
            });
            return out;
          },
          py::arg("max_items"), py::arg("max_bytes"),
          "The next serialized InsertRequest (its items become unconfirmed).")
      .def(
          "confirm",
          [](InsertRequestEncoder& encoder, const Array<uint64_t>& keys) {
            return encoder.Confirm({keys.data(), static_cast<size_t>(keys.size())});
          },
          py::arg("keys"), "Drops the unconfirmed items these keys confirm; returns how many.")
      .def("requeue", &InsertRequestEncoder::Requeue,
           "A new stream: unconfirmed items go back to the front of the queue, every chunk counts as unsent.")
      .def_property_readonly("releasable", &InsertRequestEncoder::HasReleasable,
                             "Whether take_message would release a chunk on the server (one gone from the store).")
      .def(
          "set_message_due",
          [](InsertRequestEncoder& encoder, size_t items, int64_t bytes, double seconds) {
            if (!(seconds >= 0.0) || seconds > 3600.0) throw py::value_error("seconds: must be in [0, 3600]");
            encoder.SetMessageDue(items, bytes,
                                  std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::duration<double>(seconds)));
          },
          py::arg("items"), py::arg("bytes"), py::arg("seconds"),
          "When add reports a message due: once `items` are queued, their chunks hold `bytes`, or the "
          "oldest has waited `seconds` (0 leaves one out; all 0: never).")
      .def_property_readonly("message_due", &InsertRequestEncoder::MessageDue)
      .def_property_readonly("queued", &InsertRequestEncoder::queued)
      .def_property_readonly("unconfirmed", &InsertRequestEncoder::unconfirmed)
      .def_property_readonly("in_flight_bytes", &InsertRequestEncoder::in_flight_bytes)
      .def_property_readonly("in_flight", &InsertRequestEncoder::in_flight,
                             "queued + unconfirmed, in one call (a flushing writer reads it every item).")
      .def_property_readonly("has_room", &InsertRequestEncoder::HasRoom,
                             "Whether queued and unconfirmed items stay below both in-flight limits.");

  py::class_<ReceivedInsert>(m, "InsertRequest", R"doc(
A serialized InsertRequest read by the core, as the server handles it. The
chunk payloads stay in the message (which it keeps alive) until
add_chunks copies them into their chunks. ValueError names what is
malformed or does not pair up.
)doc")
      .def(py::init<py::handle>(), py::arg("message"))
      .def("new_chunk_bytes", &ReceivedInsert::NewChunkBytes, py::arg("store"),
           "Payload bytes of the chunks `store` does not hold yet.")
      .def("add_chunks", &ReceivedInsert::AddChunks, py::arg("holder"), py::arg("store"),
           "Makes the chunks in `store` and holds them in `holder`; ValueError names the first bad one "
           "(nothing is held then).")
      .def("release", &ReceivedInsert::Release, py::arg("holder"),
           "Releases from `holder` the chunks the request lets go of.")
      .def("confirmation", &ReceivedInsert::Confirmation, py::arg("begin"), py::arg("end"),
           "The serialized InsertResponse confirming items [begin, end).")
      .def_property_readonly("runs", &ReceivedInsert::Runs,
                             "(table, begin, end) of each run of consecutive items of one table, in order.")
      .def_property_readonly("keys", &ReceivedInsert::keys)
      .def_property_readonly("priorities", &ReceivedInsert::priorities)
      .def_property_readonly("trajectories", &ReceivedInsert::trajectories)
      .def_property_readonly("has_releases", &ReceivedInsert::has_releases)
      .def("__len__", &ReceivedInsert::num_items);

  m.def("encode_sample_request", &EncodeSampleRequest, py::arg("table"), py::arg("num_samples"),
        py::arg("timeout_seconds"), "A serialized SampleRequest (timeout_seconds < 0: no limit).");
  m.def("insert_response_keys", &InsertResponseKeys, py::arg("message"),
        "The item keys a serialized InsertResponse confirms (ValueError if it is malformed).");
  m.def("decode_sample_response", &DecodeSampleResponse, py::arg("message"), py::arg("store"), py::arg("holder"),
        "(PackedTrajectories, keys, priorities, times_sampled, probabilities, table_sizes, rate_limited, "
        "end_of_request, timed_out, timeout_reason) of a serialized SampleResponse; its chunks are added to `store` and "
        "`holder`. ValueError names what is malformed (nothing is held then).");
  m.def("priority_updates", &PriorityUpdates, py::arg("updates"), py::arg("deletes"),
        "(update keys, update priorities, delete keys) as lists, from mutate_priorities' updates (a dict, a pair "
        "of arrays, or (key, priority) pairs; None: none) and deletes (keys; None: none). ValueError names a bad "
        "key or priority.");
  m.def("find_bytes_field", &FindBytesField, py::arg("message"), py::arg("field_number"),
        "(field_start, field_end, value_start) of the last top-level length-delimited field `field_number` of a "
        "serialized message, or None. ValueError if the message is malformed.");
}

}  // namespace resound::bindings

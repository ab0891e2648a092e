// What the gRPC service needs from the core to carry many chunks and items per
// message as flat arrays: resound._core.ChunkHolder, PackedTrajectories and
// pack_chunks. Each call handles a whole message, so the per-item work of the
// service runs here rather than in Python.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
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
#include "resound/chunk_batch_fields.h"
#include "resound/chunk_holder.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"
#include "resound/insert_request_encoder.h"
#include "resound/packed_trajectories.h"
#include "resound/proto_reader.h"
#include "resound/proto_writer.h"

namespace resound::bindings {
namespace {

template <typename T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

template <typename T>
std::vector<T> ToVector(const Array<T>& array, const char* argument) {
  if (array.ndim() != 1) throw InvalidArgumentError(std::string(argument) + " must be one-dimensional");
  return std::vector<T>(array.data(), array.data() + array.size());
}

void CheckLength(const char* argument, size_t length, size_t expected) {
  if (length != expected) {
    throw InvalidArgumentError(std::string(argument) + " has " + std::to_string(length) + " entries; keys has " +
                               std::to_string(expected));
  }
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
  }
  return metadata;
}

py::tuple LayoutOf(const Chunk& chunk) {
  py::list shape;
  for (const int64_t dim : chunk.step_shape()) shape.append(dim);
  return py::make_tuple(chunk.dtype().str(), std::move(shape), CompressionName(chunk.compression()),
                        chunk.delta_encoded());
}

void AddChunks(ChunkHolder& holder, ChunkStore& store, const py::sequence& layouts, const Array<uint64_t>& keys,
               const Array<uint32_t>& layout_indices, const Array<int64_t>& num_steps,
               const Array<uint64_t>& episode_ids, const Array<int64_t>& start_steps,
               const Array<int64_t>& end_steps, const Array<int64_t>& data_sizes, py::handle data) {
  std::vector<ChunkMetadata> templates;
  templates.reserve(layouts.size());
  for (size_t i = 0; i < layouts.size(); ++i) templates.push_back(ParseLayout(layouts[i], i));
  const size_t count = static_cast<size_t>(keys.size());
  CheckLength("layout_indices", static_cast<size_t>(layout_indices.size()), count);
  CheckLength("num_steps", static_cast<size_t>(num_steps.size()), count);
  CheckLength("episode_ids", static_cast<size_t>(episode_ids.size()), count);
  CheckLength("start_steps", static_cast<size_t>(start_steps.size()), count);
  CheckLength("end_steps", static_cast<size_t>(end_steps.size()), count);
  CheckLength("data_sizes", static_cast<size_t>(data_sizes.size()), count);
  const BufferView payload(data);
  // Every size is checked before any chunk is made, so that a bad batch adds
  // nothing.
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const int64_t size = data_sizes.data()[i];
    if (size < 0 || static_cast<uint64_t>(size) > payload.size() - total) {
      throw InvalidArgumentError("chunk " + std::to_string(keys.data()[i]) +
                                 " is invalid: data_sizes run past the end of data (" +
                                 std::to_string(payload.size()) + " bytes)");
    }
    if (layout_indices.data()[i] >= templates.size()) {
      throw InvalidArgumentError("chunk " + std::to_string(keys.data()[i]) + " is invalid: layout index " +
                                 std::to_string(layout_indices.data()[i]) + " is not below the " +
                                 std::to_string(templates.size()) + " layouts");
    }
    total += static_cast<size_t>(size);
  }
  if (total != payload.size()) {
    throw InvalidArgumentError("data has " + std::to_string(payload.size()) + " bytes but data_sizes add up to " +
                               std::to_string(total));
  }
  std::vector<std::shared_ptr<const Chunk>> made;
  made.reserve(count);
  {
    std::optional<py::gil_scoped_release> release;
    if (payload.size() > kKeepGilBelowBytes) release.emplace();
    const auto* bytes = static_cast<const std::byte*>(payload.data());
    size_t offset = 0;
    for (size_t i = 0; i < count; ++i) {
      ChunkMetadata metadata = templates[layout_indices.data()[i]];
      metadata.key = keys.data()[i];
      metadata.num_steps = num_steps.data()[i];
      metadata.episode_id = episode_ids.data()[i];
      metadata.start_step = start_steps.data()[i];
      metadata.end_step = end_steps.data()[i];
      const auto size = static_cast<size_t>(data_sizes.data()[i]);
      try {
        metadata.uncompressed_size = Chunk::RawSize(metadata);
        made.push_back(store.Insert(metadata, {bytes + offset, size}));
      } catch (const InvalidArgumentError& error) {
        throw InvalidArgumentError("chunk " + std::to_string(metadata.key) + " is invalid: " + error.what());
      }
      offset += size;
    }
  }
  for (auto& chunk : made) holder.Hold(std::move(chunk));
}

// (layouts, keys, layout_indices, num_steps, episode_ids, start_steps,
// end_steps, data_sizes) of `chunks` (their payloads go separately: see
// AppendPayloads).
py::tuple PackChunks(const std::vector<std::shared_ptr<Chunk>>& chunks) {
  std::vector<const Chunk*> pointers;
  pointers.reserve(chunks.size());
  for (const auto& chunk : chunks) {
    if (!chunk) throw InvalidArgumentError("chunks must not hold None");
    pointers.push_back(chunk.get());
  }
  const ChunkBatchFields fields = ChunkBatchFields::Of(pointers);
  py::list layouts;
  for (const Chunk* chunk : fields.layouts) layouts.append(LayoutOf(*chunk));
  return py::make_tuple(std::move(layouts), fields.keys, fields.layout_indices, fields.num_steps,
                        fields.episode_ids, fields.start_steps, fields.end_steps, fields.data_sizes);
}

// `head` (a serialized message) followed by bytes field `field_number` holding
// the payloads of `chunks` back to back: a message whose payloads were copied
// once, straight from the chunks into the result.
py::bytes AppendPayloads(const py::bytes& head, uint32_t field_number, const std::vector<std::shared_ptr<Chunk>>& chunks) {
  if (field_number == 0 || field_number >= (1u << 29)) throw InvalidArgumentError("field_number must be in [1, 2**29)");
  size_t total = 0;
  for (const auto& chunk : chunks) {
    if (!chunk) throw InvalidArgumentError("chunks must not hold None");
    total += chunk->data_size();
  }
  ProtoWriter prefix;
  prefix.Tag(field_number, ProtoWriter::kLengthDelimited);
  prefix.Varint(total);
  const std::string_view head_bytes(PyBytes_AS_STRING(head.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(head.ptr())));
  py::bytes out(nullptr, static_cast<py::ssize_t>(head_bytes.size() + prefix.data().size() + total));
  char* cursor = PyBytes_AS_STRING(out.ptr());
  std::memcpy(cursor, head_bytes.data(), head_bytes.size());
  cursor += head_bytes.size();
  std::memcpy(cursor, prefix.data().data(), prefix.data().size());
  cursor += prefix.data().size();
  std::optional<py::gil_scoped_release> release;
  if (total > kKeepGilBelowBytes) release.emplace();
  for (const auto& chunk : chunks) {
    std::memcpy(cursor, chunk->data(), chunk->data_size());
    cursor += chunk->data_size();
  }
  return out;
}

// FindLengthDelimitedField of a Python buffer, as (field_start, field_end,
// value_start) or None.
py::object FindBytesField(py::handle message, uint32_t field_number) {
  const BufferView view(message);
  const auto found = FindLengthDelimitedField({static_cast<const uint8_t*>(view.data()), view.size()}, field_number);
  if (!found) return py::none();
  return py::make_tuple(found->field_start, found->field_end, found->value_start);
}

py::list ToLists(const PackedTrajectories& packed) {
  py::list out;
  out.append(py::cast(packed.num_columns()));
  out.append(py::cast(packed.num_slices()));
  py::list squeeze;
  for (const uint8_t flag : packed.squeeze()) squeeze.append(py::bool_(flag != 0));
  out.append(std::move(squeeze));
  out.append(py::cast(packed.chunk_keys()));
  out.append(py::cast(packed.offsets()));
  out.append(py::cast(packed.lengths()));
  return out;
}

}  // namespace

py::list PackedTrajectoryLists(const PackedTrajectories& packed) { return ToLists(packed); }

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
      .def(py::init([](std::shared_ptr<ChunkStore> store) {
             return std::make_shared<InsertRequestEncoder>(std::move(store));
           }),
           py::arg("store"))
      .def(
          "add",
          [](InsertRequestEncoder& encoder, const std::string& table, py::handle key, double priority,
             py::handle trajectory) {
            encoder.Add(table, ToKey(key, "key"), priority, ToTrajectory(trajectory, "trajectory"));
          },
          py::arg("table"), py::arg("key"), py::arg("priority"), py::arg("trajectory"),
          "Queues an item (trajectory as Table.insert takes it); NotFoundError if a chunk is not live.")
      .def(
          "add_one",
          [](InsertRequestEncoder& encoder, const std::string& table, py::handle key, double priority,
             py::handle chunk_key, int64_t offset, int64_t length, bool squeeze) {
            Trajectory trajectory;
            trajectory.push_back({{{ToKey(chunk_key, "chunk_key"), offset, length}}, squeeze});
            encoder.Add(table, ToKey(key, "key"), priority, std::move(trajectory));
          },
          py::arg("table"), py::arg("key"), py::arg("priority"), py::arg("chunk_key"), py::arg("offset"),
          py::arg("length"), py::arg("squeeze"), "add() of one column of one slice, without the nested lists.")
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
      .def_property_readonly("queued", &InsertRequestEncoder::queued)
      .def_property_readonly("unconfirmed", &InsertRequestEncoder::unconfirmed)
      .def_property_readonly("in_flight_bytes", &InsertRequestEncoder::in_flight_bytes);

  m.def("pack_chunks", &PackChunks, py::arg("chunks"),
        "(layouts, keys, layout_indices, num_steps, episode_ids, start_steps, end_steps, data_sizes) of `chunks`, "
        "as lists.");
  m.def("append_payloads", &AppendPayloads, py::arg("head"), py::arg("field_number"), py::arg("chunks"),
        "`head` (a serialized message) plus bytes field `field_number` holding the chunks' payloads back to back.");
  m.def("find_bytes_field", &FindBytesField, py::arg("message"), py::arg("field_number"),
        "(field_start, field_end, value_start) of the last top-level length-delimited field `field_number` of a "
        "serialized message, or None. ValueError if the message is malformed.");
}

}  // namespace resound::bindings

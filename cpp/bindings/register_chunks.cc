// resound._core.Chunk and resound._core.ChunkStore.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "buffer_view.h"
#include "conversions.h"
#include "register.h"
#include "resound/chunk.h"
#include "resound/column_chunker.h"
#include "resound/chunk_store.h"
#include "resound/errors.h"

namespace resound::bindings {
namespace {



// Completing a chunk copies it; large ones are copied without the GIL.
void ChunkerFinalize(ColumnChunker& chunker) {
  std::optional<py::gil_scoped_release> release;
  if (chunker.row_bytes() * static_cast<size_t>(chunker.open_rows()) > kKeepGilBelowBytes) release.emplace();
  chunker.Finalize();
}

py::tuple ShapeTuple(std::span<const int64_t> shape) {
  py::tuple out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) out[i] = shape[i];
  return out;
}

}  // namespace

void RegisterChunks(py::module_& m) {
  py::class_<Chunk, std::shared_ptr<Chunk>>(m, "Chunk", py::buffer_protocol(), R"doc(
An immutable block of column data held in a ChunkStore. Made only by
ChunkStore.add. Supports the buffer protocol: memoryview(chunk) and
numpy.frombuffer(chunk, dtype) read the payload without copying.
)doc")
      .def_property_readonly("key", &Chunk::key)
      .def_property_readonly("dtype", [](const Chunk& c) { return c.dtype().str(); })
      .def_property_readonly("shape", [](const Chunk& c) { return ShapeTuple(c.step_shape()); },
                             "Shape of one step (cell) of the column.")
      .def_property_readonly("num_steps", &Chunk::num_steps)
      .def_property_readonly("compression",
                             [](const Chunk& c) { return CompressionName(c.compression()); })
      .def_property_readonly("delta_encoded", [](const Chunk& c) { return c.delta_encoded(); })
      .def_property_readonly("episode_id", &Chunk::episode_id)
      .def_property_readonly("start_step", [](const Chunk& c) { return c.start_step(); })
      .def_property_readonly("end_step", [](const Chunk& c) { return c.end_step(); })
      .def_property_readonly("uncompressed_size", [](const Chunk& c) { return c.uncompressed_size(); })
      .def_property_readonly("nbytes", &Chunk::data_size, "Size of the stored (maybe compressed) payload.")
      .def_property_readonly("memory_bytes", &Chunk::memory_bytes)
      .def_buffer([](Chunk& c) {
        return py::buffer_info(const_cast<std::byte*>(c.data()), 1, py::format_descriptor<uint8_t>::format(),
                               1, {static_cast<py::ssize_t>(c.data_size())}, {1}, /*readonly=*/true);
      })
      .def("__repr__", [](const Chunk& c) {
        return "Chunk(key=" + std::to_string(c.key()) + ", dtype='" + std::string(c.dtype().str()) +
               "', shape=" + std::string(py::repr(ShapeTuple(c.step_shape()))) +
               ", num_steps=" + std::to_string(c.num_steps()) + ", compression='" +
               CompressionName(c.compression()) + "', nbytes=" + std::to_string(c.data_size()) + ")";
      });

  py::class_<ChunkStore, std::shared_ptr<ChunkStore>>(m, "ChunkStore", R"doc(
Index of live chunks by key, sharded by key so concurrent writers rarely
contend. The store does not own chunks: a chunk lives while a Chunk handle or
an item references it, and disappears from the store when the last one goes.
)doc")
      .def(py::init([](size_t num_shards, bool cached_payloads, bool shareable_payloads) {
             return std::make_shared<ChunkStore>(
                 num_shards, cached_payloads ? Chunk::PayloadCopy::kCached : Chunk::PayloadCopy::kStreamed,
                 shareable_payloads);
           }),
           py::arg("num_shards") = ChunkStore::kDefaultShards, py::arg("cached_payloads") = false,
           py::arg("shareable_payloads") = false,
           "cached_payloads: copy payloads in with ordinary stores (for chunks sent right after they are "
           "made, a remote writer's), not past the caches as a table's large ones are. shareable_payloads: "
           "large chunks in the same-host transport's payload arena once one is made (a client's).")
      .def(
          "add",
          [](ChunkStore& store, py::handle key, py::handle data, const std::string& dtype,
             const std::vector<int64_t>& shape, int64_t num_steps, const std::string& compression,
             bool delta_encoded, py::handle episode_id, int64_t start_step, std::optional<int64_t> end_step) {
            ChunkMetadata metadata;
            metadata.key = ToKey(key, "key");
            metadata.dtype = DType::Parse(dtype);
            metadata.step_shape = shape;
            metadata.num_steps = num_steps;
            metadata.compression = ParseCompression(compression);
            metadata.delta_encoded = delta_encoded;
            metadata.episode_id = ToKey(episode_id, "episode_id");
            metadata.start_step = start_step;
            metadata.uncompressed_size = Chunk::RawSize(metadata);  // also checks num_steps >= 1
            if (!end_step.has_value() && start_step > std::numeric_limits<int64_t>::max() - num_steps) {
              throw InvalidArgumentError("start_step is too large");
            }
            metadata.end_step = end_step.value_or(start_step + num_steps - 1);
            BufferView view(data);
            std::shared_ptr<const Chunk> chunk;
            {
              // Large copies run without the GIL (the view keeps the exporter
              // from resizing the buffer meanwhile). Small ones keep it: a
              // copy of a few KB takes less time than handing the GIL to
              // another thread and queueing to get it back.
              std::optional<py::gil_scoped_release> release;
              if (view.size() > kKeepGilBelowBytes) release.emplace();
              chunk = store.Insert(metadata, {static_cast<const std::byte*>(view.data()), view.size()});
            }
            return Hold(std::move(chunk));
          },
          py::arg("key"), py::arg("data"), py::arg("dtype"), py::arg("shape"), py::arg("num_steps"),
          py::arg("compression") = "none", py::arg("delta_encoded") = false,
          py::arg("episode_id") = 0, py::arg("start_step") = 0, py::arg("end_step") = py::none(),
          R"doc(Copies `data` into a new chunk and returns it.

If a live chunk with this key exists and holds the same content, that chunk is
returned; different content under the same key raises ValueError. Keep the
returned handle until an item references the chunk.

Example:
    >>> store = ChunkStore()
    >>> c = store.add(7, np.zeros((4, 3), np.float32), "<f4", (3,), 4)
    >>> c.num_steps, c.shape
    (4, (3,))
)doc")
      .def(
          "get",
          [](const ChunkStore& store, py::handle key) { return Hold(store.Get(ToKey(key, "key"))); },
          py::arg("key"), "The live chunk with `key`; KeyError if there is none.")
      .def(
          "find",
          [](const ChunkStore& store, py::handle key) -> std::optional<std::shared_ptr<Chunk>> {
            auto chunk = store.Find(ToKey(key, "key"));
            if (!chunk) return std::nullopt;
            return Hold(std::move(chunk));
          },
          py::arg("key"), "The live chunk with `key`, or None.")
      .def("__contains__", [](const ChunkStore& store, py::handle key) {
        return store.Find(ToKey(key, "key")) != nullptr;
      })
      .def("__len__", &ChunkStore::num_chunks)
      .def_property_readonly("memory_bytes", &ChunkStore::memory_bytes,
                             "Memory held by live chunks (payload plus bookkeeping).");

  py::class_<ColumnChunker>(m, "ColumnChunker", R"doc(
Builds the uncompressed chunks of one writer column in `store`: `append`
copies a row into the open chunk (completing it at `max_chunk_length` rows)
and returns the chunk's key. Complete chunks are kept alive while one of their
rows is among the newest `keep_alive` rows; `ChunkStore.get(key)` finds them.

Example:
    >>> store = ChunkStore()
    >>> chunker = ColumnChunker(store, "<f4", (3,), max_chunk_length=2, keep_alive=2)
    >>> keys = [chunker.append(np.zeros(3, np.float32), 0, step) for step in range(5)]
    >>> keys[0] == keys[1], chunker.open_rows, len(chunker), keys[0] in store
    (True, 1, 1, False)
)doc")
      .def(py::init([](std::shared_ptr<ChunkStore> store, const std::string& dtype, std::vector<int64_t> shape,
                       int64_t max_chunk_length, int64_t keep_alive) {
             return std::make_unique<ColumnChunker>(std::move(store), DType::Parse(dtype), std::move(shape),
                                                    max_chunk_length, keep_alive);
           }),
           py::arg("store"), py::arg("dtype"), py::arg("shape"), py::arg("max_chunk_length"),
           py::arg("keep_alive"))
      .def(
          "append",
          [](ColumnChunker& chunker, py::handle row, py::handle episode_id, int64_t step) {
            const uint64_t episode = ToKey(episode_id, "episode_id");
            BufferView view(row);
            // As in ChunkStore.add: small copies keep the GIL.
            std::optional<py::gil_scoped_release> release;
            if (view.size() > kKeepGilBelowBytes) release.emplace();
            return chunker.Append({static_cast<const std::byte*>(view.data()), view.size()}, episode, step);
          },
          py::arg("row"), py::arg("episode_id"), py::arg("step"),
          "Copies one row (a C-contiguous buffer of one cell) and returns its chunk's key.")
      .def("finalize", &ChunkerFinalize, "Completes the open chunk with the rows it has.")
      .def(
          "open_row",
          [](const ColumnChunker& chunker, int64_t offset) {
            const std::vector<std::byte> row = chunker.OpenRow(offset);
            return py::bytes(reinterpret_cast<const char*>(row.data()), row.size());
          },
          py::arg("offset"), "The bytes of row `offset` of the open chunk.")
      .def("clear", &ColumnChunker::Clear, "Drops open rows and kept chunks; rows count from 0 again.")
      .def_property("keep_alive", &ColumnChunker::keep_alive, &ColumnChunker::SetKeepAlive)
      .def_property("max_chunk_length", &ColumnChunker::max_chunk_length, &ColumnChunker::SetMaxChunkLength)
      .def_property_readonly("open_rows", &ColumnChunker::open_rows)
      .def("__len__", &ColumnChunker::num_kept, "Complete chunks kept alive.");
}

}  // namespace resound::bindings

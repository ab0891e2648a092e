// resound._core.VectorWriter: steps of N environments in one call.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "buffer_view.h"
#include "conversions.h"
#include "register.h"
#include "resound/chunk_store.h"
#include "resound/deadline.h"
#include "resound/dtype.h"
#include "resound/errors.h"
#include "resound/table.h"
#include "resound/vector_writer.h"

namespace resound::bindings {
namespace {

using Flags = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;
using Priorities = py::array_t<double, py::array::c_style | py::array::forcecast>;

std::span<const uint8_t> FlagSpan(const std::optional<Flags>& envs) {
  if (!envs) return {};
  return {envs->data(), static_cast<size_t>(envs->size())};
}

constexpr char kNativeOrder = std::endian::native == std::endian::little ? '<' : '>';

// numpy's dtype.str of `dtype` is `want`'s type string: same kind, size and
// byte order ('|', no byte order, matches either).
bool SameDType(const py::dtype& dtype, const DType& want) {
  if (dtype.kind() != want.kind() || dtype.itemsize() != want.itemsize() || dtype.has_fields()) return false;
  char order = dtype.byteorder();
  if (order == '=') order = kNativeOrder;
  const char want_order = want.str().front();
  return order == want_order || order == '|' || want_order == '|';
}

std::string ShapeString(const py::array& array) {
  std::string text = "[";
  for (py::ssize_t i = 0; i < array.ndim(); ++i) text += (i ? ", " : "") + std::to_string(array.shape(i));
  return text + "]";
}

// Column c of a step, as a buffer: a C-contiguous numpy array of the
// column's dtype and of shape (num_envs, *step_shape). Anything else is a
// TypeError naming the column and what it needs, before anything is
// appended: resound.VectorWriter converts (or names the field) only then.
std::unique_ptr<BufferView> CheckedColumn(py::handle object, size_t c, int64_t num_envs,
                                          const VectorWriter::ColumnFormat& format) {
  bool ok = py::isinstance<py::array>(object);
  if (ok) {
    const auto array = py::reinterpret_borrow<py::array>(object);
    ok = (array.flags() & py::array::c_style) != 0 && SameDType(array.dtype(), format.dtype) &&
         array.ndim() == static_cast<py::ssize_t>(format.step_shape.size() + 1) && array.shape(0) == num_envs;
    for (size_t i = 0; ok && i < format.step_shape.size(); ++i) {
      ok = array.shape(static_cast<py::ssize_t>(i + 1)) == format.step_shape[i];
    }
  }
  if (ok) return std::make_unique<BufferView>(object);
  std::string need = "[" + std::to_string(num_envs);
  for (const int64_t size : format.step_shape) need += ", " + std::to_string(size);
  need += "]";
  std::string got = std::string(py::str(py::type::of(object).attr("__name__")));
  if (py::isinstance<py::array>(object)) {
    const auto array = py::reinterpret_borrow<py::array>(object);
    got = std::string(py::str(array.dtype().attr("str"))) + " array of shape " + ShapeString(array) +
          ((array.flags() & py::array::c_style) != 0 ? "" : ", not C-contiguous");
  }
  throw py::type_error("columns[" + std::to_string(c) + "] must be a C-contiguous numpy array of dtype " +
                       std::string(format.dtype.str()) + " and shape " + need + ", got " + got);
}

}  // namespace

void RegisterVectorWriter(py::module_& m) {
  py::class_<VectorWriter>(m, "VectorWriter", R"doc(
Steps of `num_envs` environments in one call each (see resound.VectorWriter,
which this serves): `append` copies one row per environment of every column
into that environment's own chunks, `create_items` queues an item of each
selected environment's newest steps, and `insert_ready` inserts the items
whose chunks are complete.

Example:
    >>> store = ChunkStore()
    >>> writer = VectorWriter(store, 2, [("<f4", (3,))], max_sequence_length=2, max_chunk_length=2)
    >>> writer.append([np.zeros((2, 3), np.float32)])
    0
    >>> writer.episode_steps
    [1, 1]
)doc")
      .def(py::init([](std::shared_ptr<ChunkStore> store, int64_t num_envs,
                       const std::vector<std::pair<std::string, std::vector<int64_t>>>& columns,
                       int64_t max_sequence_length, int64_t max_chunk_length) {
             std::vector<VectorWriter::ColumnFormat> formats;
             formats.reserve(columns.size());
             for (const auto& [dtype, shape] : columns) formats.push_back({DType::Parse(dtype), shape});
             return std::make_unique<VectorWriter>(std::move(store), num_envs, std::move(formats),
                                                   max_sequence_length, max_chunk_length);
           }),
           py::arg("store"), py::arg("num_envs"), py::arg("columns"), py::arg("max_sequence_length"),
           py::arg("max_chunk_length"))
      .def(
          "append",
          [](VectorWriter& writer, const py::sequence& columns) {
            const std::vector<VectorWriter::ColumnFormat>& formats = writer.formats();
            const size_t count = columns.size();
            if (count != formats.size()) {
              throw InvalidArgumentError("a step has " + std::to_string(formats.size()) + " columns, got " +
                                         std::to_string(count));
            }
            // The views stay alive (and hold their buffers) for the copy.
            std::vector<std::unique_ptr<BufferView>> views;
            std::vector<std::span<const std::byte>> spans;
            size_t bytes = 0;
            views.reserve(count);
            spans.reserve(count);
            for (size_t c = 0; c < count; ++c) {
              views.push_back(CheckedColumn(columns[c], c, writer.num_envs(), formats[c]));
              spans.emplace_back(static_cast<const std::byte*>(views.back()->data()), views.back()->size());
              bytes += views.back()->size();
            }
            // As in ColumnChunker.append: small copies keep the GIL.
            std::optional<py::gil_scoped_release> release;
            if (bytes > kKeepGilBelowBytes) release.emplace();
            return writer.Append(spans).queued;
          },
          py::arg("columns"),
          "One step for every environment: column c a C-contiguous numpy array of its dtype and shape "
          "(num_envs, *step_shape) (TypeError naming the column otherwise, with nothing appended). Then "
          "inserts the ready items their tables take without waiting; returns num_queued.")
      .def(
          "create_items",
          [](VectorWriter& writer, const std::shared_ptr<Table>& table, int64_t length, const Priorities& priorities,
             const std::optional<Flags>& envs) {
            const VectorWriter::Written written = writer.CreateItems(
                table, length, {priorities.data(), static_cast<size_t>(priorities.size())}, FlagSpan(envs));
            return py::make_tuple(written.created, written.queued);
          },
          py::arg("table"), py::arg("length"), py::arg("priorities"), py::arg("envs") = py::none(),
          "Queues an item of the newest `length` steps of each selected environment that has them, then "
          "inserts the ready items their tables take without waiting; returns (items queued, num_queued).")
      .def(
          "end_episodes",
          [](VectorWriter& writer, const std::optional<Flags>& envs) {
            return writer.EndEpisodes(FlagSpan(envs)).queued;
          },
          py::arg("envs") = py::none(),
          "Ends the selected environments' episodes (None: all), then inserts the ready items their tables "
          "take without waiting; returns num_queued.")
      .def("complete_chunks", &VectorWriter::CompleteChunks, "Completes every open chunk.")
      .def(
          "insert_ready",
          [](VectorWriter& writer, std::optional<double> timeout) {
            const Deadline deadline = ToDeadline(timeout);
            // A table with room takes the items at once: no GIL hand-over.
            int64_t inserted = writer.InsertReady(Deadline::AfterSeconds(0));
            if (writer.num_ready() == 0 || (timeout && *timeout == 0.0)) return inserted;
            py::gil_scoped_release release;
            return inserted + writer.InsertReady(deadline);
          },
          py::arg("timeout") = 0.0,
          "Inserts ready items in order, waiting up to `timeout` seconds (None: forever) for rate "
          "limiters; returns how many went in.")
      .def_property_readonly("num_envs", &VectorWriter::num_envs)
      .def_property_readonly("num_queued", &VectorWriter::num_queued)
      .def_property_readonly("num_ready", &VectorWriter::num_ready)
      .def_property_readonly("episode_steps", &VectorWriter::episode_steps);
}

}  // namespace resound::bindings

// resound._core.Table and the values it returns (SampledItem, ItemSnapshot,
// TableInfo). Every method that takes the table lock runs without the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "conversions.h"
#include "pooled_array.h"
#include "register.h"
#include "resound/chunk_store.h"
#include "resound/column_gather.h"
#include "resound/errors.h"
#include "resound/item.h"
#include "resound/selectors/item_selector.h"
#include "resound/chunk_holder.h"
#include "resound/packed_trajectories.h"
#include "resound/sample_response.h"
#include "resound/insert_request.h"
#include "resound/table.h"

namespace resound::bindings {
namespace {

py::list ChunkList(const Item& item) {
  py::list chunks;
  for (const auto& chunk : item.chunks()) chunks.append(Hold(chunk));
  return chunks;
}

std::vector<ItemRequest> ToRequests(py::handle items) {
  if (!py::isinstance<py::sequence>(items)) {
    throw InvalidArgumentError("items must be a sequence of (key, priority, trajectory)");
  }
  const auto sequence = py::reinterpret_borrow<py::sequence>(items);
  std::vector<ItemRequest> requests;
  requests.reserve(sequence.size());
  for (size_t i = 0; i < sequence.size(); ++i) {
    const auto where = [i] { return "items[" + std::to_string(i) + "]"; };
    py::object entry = sequence[i];
    if (!py::isinstance<py::sequence>(entry) || py::len(entry) != 3) {
      throw InvalidArgumentError(where() + " must be a triple (key, priority, trajectory)");
    }
    const auto triple = py::reinterpret_borrow<py::sequence>(entry);
    ItemRequest request;
    if (!ParseKey(triple[0], request.key)) {
      throw InvalidArgumentError(where() + ".key must be an integer in [0, 2**64)");
    }
    if (!ParseDouble(triple[1], request.priority)) {
      throw InvalidArgumentError(where() + ".priority must be a number");
    }
    py::object trajectory = triple[2];
    if (trajectory.is_none()) throw InvalidArgumentError(where() + ".trajectory must be a sequence of columns");
    request.trajectory = ToTrajectory(trajectory, "trajectory");
    requests.push_back(std::move(request));
  }
  return requests;
}

// Column specs as (typestr, shape) pairs or (typestr, shape, label) triples;
// shape is None (any) or a sequence of ints and None (any size); label names
// the column in errors.
std::vector<ColumnSpec> ToColumnSpecs(const py::sequence& specs) {
  std::vector<ColumnSpec> out;
  out.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    py::object entry = specs[i];
    if (!py::isinstance<py::sequence>(entry) || py::isinstance<py::str>(entry) ||
        (py::len(entry) != 2 && py::len(entry) != 3)) {
      throw InvalidArgumentError("column_specs[" + std::to_string(i) +
                                 "] must be a pair (typestr, shape) or a triple (typestr, shape, label)");
    }
    const auto pair = py::reinterpret_borrow<py::sequence>(entry);
    std::optional<std::vector<int64_t>> shape;
    py::object dims = pair[1];
    if (!dims.is_none()) {
      shape.emplace();
      for (py::handle dim : dims) {
        shape->push_back(dim.is_none() ? -1 : ToInt64(dim, "column_specs[" + std::to_string(i) + "] dimension"));
      }
    }
    std::string label = pair.size() == 3 ? py::cast<std::string>(pair[2]) : std::string();
    out.emplace_back(py::cast<std::string>(pair[0]), std::move(shape), std::move(label));
  }
  return out;
}

template <typename Entry>
void DefineItemView(py::class_<Entry>& cls) {
  cls.def_property_readonly("key", [](const Entry& e) { return e.item->key(); })
      .def_readonly("priority", &Entry::priority)
      .def_readonly("times_sampled", &Entry::times_sampled)
      .def_readonly("inserted_at", &Entry::inserted_at_ns, "Nanoseconds since the Unix epoch.")
      .def_property_readonly("trajectory", [](const Entry& e) { return FromTrajectory(e.item->trajectory()); })
      .def_property_readonly("chunks", [](const Entry& e) { return ChunkList(*e.item); },
                             "Distinct chunks of the trajectory, in order of first reference.");
}

// The result of Table.sample: a sequence of SampledItem that also exposes
// each info field as a numpy array, so batch consumers never build one
// Python object per sample.
struct SampleBatch {
  std::vector<SampledItem> samples;
};

template <typename T, typename Field>
py::array_t<T> Column(const SampleBatch& batch, Field field) {
  py::array_t<T> out(static_cast<py::ssize_t>(batch.samples.size()));
  T* data = out.mutable_data();
  for (size_t i = 0; i < batch.samples.size(); ++i) data[i] = static_cast<T>(field(batch.samples[i]));
  return out;
}

const SampledItem& At(const SampleBatch& batch, py::ssize_t index) {
  const auto size = static_cast<py::ssize_t>(batch.samples.size());
  if (index < 0) index += size;
  if (index < 0 || index >= size) throw py::index_error("sample index out of range");
  return batch.samples[static_cast<size_t>(index)];
}

size_t NumColumns(const SampleBatch& batch) noexcept {
  return batch.samples.empty() ? 0 : batch.samples.front().item->trajectory().size();
}

// One array per column of the first sample, None where the column cannot be
// stacked. Arrays are allocated with the GIL (numpy needs it) and filled
// without it.
py::list StackSamples(std::span<const SampledItem> samples) {
  const size_t num_columns = samples.empty() ? 0 : samples.front().item->trajectory().size();
  std::vector<std::optional<ColumnLayout>> layouts;
  layouts.reserve(num_columns);
  {
    py::gil_scoped_release release;
    for (size_t c = 0; c < num_columns; ++c) layouts.push_back(PlanColumn(samples, c));
  }
  py::list arrays;
  std::vector<std::span<std::byte>> outputs(num_columns);
  for (size_t c = 0; c < num_columns; ++c) {
    if (!layouts[c]) {
      arrays.append(py::none());
      continue;
    }
    const auto shape = layouts[c]->Shape(samples.size());
    // From the buffer pool: a batch of large items is a large array, and a
    // learner asks for one of the same size again and again.
    py::array array = PooledArray(py::dtype(layouts[c]->dtype.str()), {shape.begin(), shape.end()});
    outputs[c] = {static_cast<std::byte*>(array.mutable_data()), static_cast<size_t>(array.nbytes())};
    arrays.append(std::move(array));
  }
  {
    // The arrays are referenced only by `arrays`, which no other thread can
    // see yet, and the samples never change once made.
    py::gil_scoped_release release;
    for (size_t c = 0; c < num_columns; ++c) {
      if (layouts[c]) GatherColumn(samples, c, *layouts[c], outputs[c]);
    }
  }
  return arrays;
}

py::list StackColumns(const SampleBatch& batch) { return StackSamples(batch.samples); }

// StackColumns for trajectories received over gRPC: the items of every
// PackedTrajectories in `packed_list` in order, their chunks found in `store`
// (validated as an inserted item's would be).
py::list StackTrajectories(const py::list& packed_list, const ChunkStore& store) {
  std::vector<SampledItem> samples;
  for (const py::handle& handle : packed_list) {
    const auto& packed = handle.cast<const PackedTrajectories&>();
    for (size_t i = 0; i < packed.size(); ++i) {
      samples.push_back(SampledItem{Item::Create(i, packed.Get(i), store)});
    }
  }
  return StackSamples(samples);
}

// Priority batches up to this many entries are applied with the GIL held.
constexpr size_t kKeepGilBelowEntries = 1024;

// Inserts `prepared` in order. The first attempt does not wait and keeps the
// GIL: it takes microseconds, and releasing the GIL for so short a call makes
// several writer threads queue for it on every call (a convoy that cost 3x at
// 4 threads). Only what the rate limiter holds back is waited for, without
// the GIL.
InsertBatchResult InsertTryingFirst(Table& table, std::vector<Table::PreparedInsert>& prepared,
                                    const Deadline& deadline) {
  InsertBatchResult result = table.InsertPrepared(prepared, 0, Deadline::AfterSeconds(0));
  if (!result.error || !IsDeadlineExceeded(result.error) || deadline.has_passed()) return result;
  const size_t done = result.num_applied;
  {
    py::gil_scoped_release release;
    result = table.InsertPrepared(prepared, done, deadline);
  }
  result.num_applied += done;
  return result;
}

SelectorOptions OptionsOf(const std::shared_ptr<ItemSelector>& selector, const char* argument) {
  if (!selector) throw InvalidArgumentError(std::string(argument) + " must be a selector, got None");
  return selector->options();
}

}  // namespace

void RegisterTable(py::module_& m) {
  py::class_<SampledItem> sampled(m, "SampledItem", "One sample and the item's state when it was chosen.");
  DefineItemView(sampled);
  sampled.def_readonly("probability", &SampledItem::probability)
      .def_readonly("table_size", &SampledItem::table_size)
      .def_readonly("rate_limited", &SampledItem::rate_limited);

  py::class_<SampleBatch, std::shared_ptr<SampleBatch>>(m, "SampleBatch", R"doc(
Samples returned by Table.sample: a sequence of SampledItem (len, indexing,
iteration) whose info fields are also available as numpy arrays.
)doc")
      .def(py::init<>(), "An empty batch (Table.sample never returns one; for callers with nothing to return).")
      .def("__len__", [](const SampleBatch& b) { return b.samples.size(); })
      .def("__getitem__", [](const SampleBatch& b, py::ssize_t i) { return At(b, i); }, py::arg("index"))
      .def("__iter__", [](const SampleBatch& b) { return py::make_iterator(b.samples.begin(), b.samples.end()); },
           py::keep_alive<0, 1>())
      .def_property_readonly("keys", [](const SampleBatch& b) {
        return Column<uint64_t>(b, [](const SampledItem& s) { return s.item->key(); });
      })
      .def_property_readonly("priorities", [](const SampleBatch& b) {
        return Column<double>(b, [](const SampledItem& s) { return s.priority; });
      })
      .def_property_readonly("probabilities", [](const SampleBatch& b) {
        return Column<double>(b, [](const SampledItem& s) { return s.probability; });
      })
      .def_property_readonly("times_sampled", [](const SampleBatch& b) {
        return Column<int32_t>(b, [](const SampledItem& s) { return s.times_sampled; });
      })
      .def_property_readonly("table_sizes", [](const SampleBatch& b) {
        return Column<int64_t>(b, [](const SampledItem& s) { return s.table_size; });
      })
      .def_property_readonly("inserted_at", [](const SampleBatch& b) {
        return Column<int64_t>(b, [](const SampledItem& s) { return s.inserted_at_ns; });
      })
      .def_property_readonly("rate_limited", [](const SampleBatch& b) {
        return Column<bool>(b, [](const SampledItem& s) { return s.rate_limited; });
      })
      .def_property_readonly("num_columns", &NumColumns, "Columns of the first sample (0 for an empty batch).")
      .def(
          "encode_response",
          [](const SampleBatch& b, size_t begin, size_t max_items, size_t max_bytes, bool mark_end) {
            if (begin >= b.samples.size()) throw InvalidArgumentError("begin is past the last sample");
            py::bytes out;
            size_t end = 0;
            {
              // Without the GIL: the payloads are copied here, and other
              // streams of the server go on meanwhile.
              py::gil_scoped_release release;
              end = WriteSampleResponse(b.samples, begin, max_items, max_bytes, mark_end, [&out](size_t size) {
                py::gil_scoped_acquire acquire;
                out = py::bytes(nullptr, static_cast<py::ssize_t>(size));
                return PyBytes_AS_STRING(out.ptr());
              });
            }
            return py::make_tuple(end, std::move(out));
          },
          py::arg("begin"), py::arg("max_items"), py::arg("max_bytes"), py::arg("mark_end") = false,
          R"doc((end, serialized SampleResponse) of samples [begin, end): as many as fit
`max_items` and `max_bytes` of chunk payload (at least one), every chunk they
use once. With `mark_end`, the response that reaches the batch's last sample
has end_of_request set (SampleStream).)doc")
      .def("stack_columns", &StackColumns, R"doc(
One numpy array per column of the first sample: [batch, rows, *step_shape],
or [batch, *step_shape] for a squeezed column, copied from the chunks without
the GIL. A column is None when it cannot be stacked that way (a sample lacks
it, samples differ in rows or squeeze, or a chunk is compressed, delta encoded
or of another dtype or step shape); decode those item by item. An empty batch
gives [].)doc");

  m.def("stack_trajectories", &StackTrajectories, py::arg("packed_list"), py::arg("store"), R"doc(
SampleBatch.stack_columns for items received as PackedTrajectories (a list of
them, items in order) whose chunks are live in `store`.)doc");

  py::class_<ItemSnapshot> snapshot(m, "ItemSnapshot", "An item as stored in a table.");
  DefineItemView(snapshot);

  py::class_<TableInfo>(m, "TableInfo", "A consistent snapshot of a table's state and counters.")
      .def_readonly("name", &TableInfo::name)
      .def_readonly("sampler", &TableInfo::sampler)
      .def_readonly("remover", &TableInfo::remover)
      .def_readonly("max_size", &TableInfo::max_size)
      .def_readonly("max_bytes", &TableInfo::max_bytes)
      .def_readonly("max_times_sampled", &TableInfo::max_times_sampled)
      .def_property_readonly("signature", [](const TableInfo& i) { return py::bytes(i.signature); })
      .def_readonly("current_size", &TableInfo::current_size)
      .def_readonly("num_episodes", &TableInfo::num_episodes)
      .def_readonly("num_deleted_episodes", &TableInfo::num_deleted_episodes)
      .def_readonly("num_unique_samples", &TableInfo::num_unique_samples)
      .def_readonly("num_changes", &TableInfo::num_changes,
                    "Changes to what a checkpoint of the table holds (inserts, deletions, samples, "
                    "priority updates, resets, restores) since it was created; checkpoints that "
                    "would be equal have equal counts.")
      .def_readonly("num_chunks", &TableInfo::num_chunks)
      .def_readonly("memory_bytes", &TableInfo::memory_bytes)
      .def_readonly("num_priority_updates", &TableInfo::num_priority_updates)
      .def_readonly("num_mutate_deletes", &TableInfo::num_mutate_deletes)
      .def_property_readonly("rate_limiter", [](const TableInfo& i) { return RateLimiterInfoDict(i.rate_limiter); })
      .def_property_readonly(
          "worker_time",
          [](const TableInfo& i) {
            const TableWorkerTime& time = i.worker_time;
            py::dict out;
            out["running_ms"] = time.running_ms;
            out["sampling_ms"] = time.sampling_ms;
            out["inserting_ms"] = time.inserting_ms;
            out["sleeping_ms"] = time.sleeping_ms;
            out["waiting_for_sampling_ms"] = time.waiting_for_sampling_ms;
            out["waiting_for_inserts_ms"] = time.waiting_for_inserts_ms;
            return out;
          },
          "Milliseconds since the table was made, by what it did (Reverb's TableWorkerTime fields).")
      .def_readonly("closed", &TableInfo::closed);

  py::class_<PriorityHistogram>(m, "PriorityHistogram",
                                "Item counts in equal priority bins between min and max (no bins: empty table).")
      .def_readonly("min", &PriorityHistogram::min)
      .def_readonly("max", &PriorityHistogram::max)
      .def_readonly("counts", &PriorityHistogram::counts);

  m.attr("MAX_SAMPLES_PER_CALL") = Table::kMaxSamplesPerCall;
  m.attr("MAX_HISTOGRAM_BINS") = Table::kMaxHistogramBins;
  m.attr("WAKE_INSERTS") = WakeSignal::kInserts;
  m.attr("WAKE_SAMPLES") = WakeSignal::kSamples;

  py::class_<Table, std::shared_ptr<Table>>(m, "Table", R"doc(
A bounded set of prioritized items over shared chunks, with a sampler, a
remover and a rate limiter. Thread-safe; blocking calls release the GIL.

Example:
    >>> store = ChunkStore()
    >>> table = Table("t", make_selector("uniform"), make_selector("fifo"), 100,
    ...               RateLimiter.min_size(1), chunk_store=store)
    >>> c = store.add(1, np.arange(4, dtype=np.float32), "<f4", (), 4)
    >>> table.insert(10, 1.0, [([(1, 0, 2)], False)])
    >>> [s.key for s in table.sample(1)]
    [10]
)doc")
      .def(py::init([](const std::string& name, const std::shared_ptr<ItemSelector>& sampler,
                       const std::shared_ptr<ItemSelector>& remover, int64_t max_size,
                       const std::shared_ptr<RateLimiter>& rate_limiter, int32_t max_times_sampled,
                       const py::bytes& signature, std::shared_ptr<ChunkStore> chunk_store,
                       const std::optional<py::sequence>& column_specs, int64_t max_bytes) {
             if (!rate_limiter) throw InvalidArgumentError("rate_limiter must be a RateLimiter, got None");
             TableConfig config{name,
                                OptionsOf(sampler, "sampler"),
                                OptionsOf(remover, "remover"),
                                max_size,
                                max_times_sampled,
                                rate_limiter->config(),
                                std::string(signature),
                                column_specs ? ToColumnSpecs(*column_specs) : std::vector<ColumnSpec>{},
                                max_bytes};
             return std::make_shared<Table>(std::move(config), std::move(chunk_store));
           }),
           py::arg("name"), py::arg("sampler"), py::arg("remover"), py::arg("max_size"),
           py::arg("rate_limiter"), py::arg("max_times_sampled") = 0, py::arg("signature") = py::bytes(),
           py::arg("chunk_store") = py::none(), py::arg("column_specs") = py::none(),
           py::arg("max_bytes") = 0,
           "The table builds its own selectors from the sampler's and remover's options and its own "
           "limiter from rate_limiter's configuration; the objects passed in are not shared.")
      .def_property_readonly("name", &Table::name)
      .def_property_readonly("max_size", [](const Table& t) { return t.config().max_size; })
      .def_property_readonly("max_bytes", [](const Table& t) { return t.config().max_bytes; })
      .def_property_readonly("max_times_sampled", [](const Table& t) { return t.config().max_times_sampled; })
      .def_property_readonly("signature", [](const Table& t) { return py::bytes(t.config().signature); })
      .def_property_readonly("column_specs", [](const Table& t) {
        py::list out;
        for (const ColumnSpec& spec : t.config().column_specs) {
          py::object shape = py::none();
          if (spec.shape()) {
            py::list dims;
            for (const int64_t dim : *spec.shape()) dims.append(dim < 0 ? py::object(py::none()) : py::int_(dim));
            shape = py::tuple(dims);
          }
          out.append(py::make_tuple(spec.typestr(), shape));
        }
        return out;
      }, "The signature as (typestr, shape) per column; every insert is checked against it.")
      .def_property_readonly("sampler_options", [](const Table& t) { return t.config().sampler; })
      .def_property_readonly("remover_options", [](const Table& t) { return t.config().remover; })
      .def_property_readonly("chunk_store", &Table::chunk_store)
      .def(
          "insert",
          [](Table& table, py::handle key, double priority, py::handle trajectory, std::optional<double> timeout) {
            std::vector<ItemRequest> requests;
            requests.push_back({ToKey(key, "key"), priority, ToTrajectory(trajectory, "trajectory")});
            const Deadline deadline = ToDeadline(timeout);
            auto prepared = table.Prepare(std::move(requests));
            const InsertBatchResult result = InsertTryingFirst(table, prepared, deadline);
            if (result.error) std::rethrow_exception(result.error);
          },
          py::arg("key"), py::arg("priority"), py::arg("trajectory"), py::arg("timeout") = py::none(),
          R"doc(Inserts an item, or only sets the priority if `key` is present.

trajectory: list of columns (slices, squeeze), slices a list of
(chunk_key, offset, length). Waits for the rate limiter up to `timeout`
seconds (None: forever); raises DeadlineExceededError or CancelledError.)doc")
      .def(
          "insert_batch",
          [](Table& table, py::handle items, std::optional<double> timeout) {
            const Deadline deadline = ToDeadline(timeout);
            auto prepared = table.Prepare(ToRequests(items));
            const InsertBatchResult result = InsertTryingFirst(table, prepared, deadline);
            if (result.error) RaiseWithProgress(result.error, result.num_applied);
            return result.num_applied;
          },
          py::arg("items"), py::arg("timeout") = py::none(),
          R"doc(Inserts (key, priority, trajectory) triples in order under one lock.

Every item is validated before any is inserted. If the deadline passes or the
table closes part-way, the raised error carries `num_inserted`.)doc")
      .def(
          "insert_one",
          [](Table& table, py::handle key, double priority, py::handle chunk_key, int64_t offset, int64_t length,
             bool squeeze, std::optional<double> timeout) {
            std::vector<ItemRequest> requests(1);
            requests[0].key = ToKey(key, "key");
            requests[0].priority = priority;
            requests[0].trajectory.push_back({{{ToKey(chunk_key, "chunk_key"), offset, length}}, squeeze});
            const Deadline deadline = ToDeadline(timeout);
            auto prepared = table.Prepare(std::move(requests));
            const InsertBatchResult result = InsertTryingFirst(table, prepared, deadline);
            if (result.error) RaiseWithProgress(result.error, result.num_applied);
            return result.num_applied;
          },
          py::arg("key"), py::arg("priority"), py::arg("chunk_key"), py::arg("offset"), py::arg("length"),
          py::arg("squeeze"), py::arg("timeout") = py::none(),
          R"doc(insert_batch of one item of one column of one slice, without the nested lists
(writers' most common item).)doc")
      .def(
          "insert_packed",
          [](Table& table, const py::array_t<uint64_t, py::array::c_style | py::array::forcecast>& keys,
             const py::array_t<double, py::array::c_style | py::array::forcecast>& priorities,
             const PackedTrajectories& trajectories, const ChunkHolder& holder, size_t begin, size_t end,
             std::optional<double> timeout) {
            std::vector<ItemRequest> requests = ReceivedItemRequests(
                {keys.data(), static_cast<size_t>(keys.size())},
                {priorities.data(), static_cast<size_t>(priorities.size())}, trajectories, holder, begin, end);
            const Deadline deadline = ToDeadline(timeout);
            auto prepared = table.Prepare(std::move(requests));
            const InsertBatchResult result = InsertTryingFirst(table, prepared, deadline);
            if (result.error) RaiseWithProgress(result.error, result.num_applied);
            return result.num_applied;
          },
          py::arg("keys"), py::arg("priorities"), py::arg("trajectories"), py::arg("holder"), py::arg("begin"),
          py::arg("end"), py::arg("timeout") = py::none(),
          R"doc(Inserts items [begin, end) of a packed batch in order under one lock.

Every item is validated first (columns, finite priority, chunks held by
`holder`); if the deadline passes or the table closes part-way, the raised
error carries `num_inserted`.)doc")
      .def(
          "sample",
          [](Table& table, int64_t num_samples, std::optional<double> timeout) {
            const Deadline deadline = ToDeadline(timeout);
            auto batch = std::make_shared<SampleBatch>();
            // First without waiting, keeping the GIL (see InsertTryingFirst);
            // only a call that must wait for the rate limiter lets it go.
            try {
              batch->samples = table.Sample(num_samples, Deadline::AfterSeconds(0));
            } catch (const DeadlineExceededError&) {
              if (deadline.has_passed()) throw;
              py::gil_scoped_release release;
              batch->samples = table.Sample(num_samples, deadline);
            }
            return batch;
          },
          py::arg("num_samples") = 1, py::arg("timeout") = py::none(),
          R"doc(Waits up to `timeout` for one sample, then returns up to `num_samples`
(at most MAX_SAMPLES_PER_CALL) taken in the same pass while the rate limiter
allows.)doc")
      .def(
          "mutate_priorities",
          [](Table& table, std::optional<py::object> updates, std::optional<py::object> deletes) {
            std::vector<std::pair<uint64_t, double>> update_list;
            std::vector<uint64_t> delete_list;
            if (updates && !updates->is_none()) update_list = ToUpdates(*updates);
            if (deletes && !deletes->is_none()) delete_list = ToKeys(*deletes, "deletes key");
            MutateResult result;
            {
              // Small batches keep the GIL (see InsertTryingFirst); a large
              // one lets other threads run while the table applies it.
              std::optional<py::gil_scoped_release> release;
              if (update_list.size() + delete_list.size() > kKeepGilBelowEntries) release.emplace();
              result = table.MutatePriorities(update_list, delete_list);
            }
            return py::make_tuple(result.num_updated, result.num_deleted);
          },
          py::arg("updates") = py::none(), py::arg("deletes") = py::none(),
          R"doc(Applies priority updates and deletes all-or-nothing; missing keys are
ignored. Returns (num_updated, num_deleted).)doc")
      // The event-driven server's waits (see resound/wake_signal.h). These
      // keep the GIL: each takes the table lock for a moment only.
      .def("arm_wake", &Table::ArmWake, py::arg("side"),
           R"doc(Arms side WAKE_INSERTS or WAKE_SAMPLES: wake_fd turns readable once it may
proceed or the table closes. False (nothing armed) when that is already so.)doc")
      .def_property_readonly("wake_fd", &Table::wake_fd,
                             "A descriptor to watch for reading (owned by the table).")
      .def("take_wakes", &Table::TakeWakes, "The sides raised since the last call; drains wake_fd.")
      .def("note_external_wait", &Table::NoteExternalWait, py::arg("side"), py::arg("waiting"),
           "Counts a call waiting outside the table in info's waiting/blocked figures (+1, then -1).")
      .def("why_blocked", &Table::WhyBlocked, py::arg("insert"),
           R"doc(Why one more insert (insert=True) or sample must wait now, in the user's
terms: "table 't' has 0 items; MinSize(1) needs 1 before sampling".)doc")
      .def("reset", &Table::Reset, py::call_guard<py::gil_scoped_release>())
      .def("close", &Table::Close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("closed", [](const Table& t) {
        py::gil_scoped_release release;
        return t.closed();
      })
      // Reads release the GIL: they are what monitoring threads call in
      // loops, and each call hands the GIL to threads waiting for it.
      .def("can_insert", &Table::CanInsert, py::arg("n") = 1, py::call_guard<py::gil_scoped_release>())
      .def("can_sample", &Table::CanSample, py::arg("n") = 1, py::call_guard<py::gil_scoped_release>())
      .def("__len__", &Table::size, py::call_guard<py::gil_scoped_release>())
      .def("info", &Table::Info, py::call_guard<py::gil_scoped_release>())
      .def("priority_histogram", &Table::HistogramOfPriorities, py::arg("bins"),
           py::call_guard<py::gil_scoped_release>(),
           "The items' priorities in `bins` (1..MAX_HISTOGRAM_BINS) equal bins between the lowest and highest.")
      .def("snapshot", &Table::Snapshot, py::call_guard<py::gil_scoped_release>(),
           "Every item (key, priority, times_sampled, inserted_at, trajectory, chunks) in insertion order.")
      .def("__repr__", [](const Table& t) {
        const auto& c = t.config();
        return "Table(name='" + c.name + "', sampler=" + c.sampler.ToString() + ", remover=" + c.remover.ToString() +
               ", max_size=" + std::to_string(c.max_size) + ", max_times_sampled=" +
               std::to_string(c.max_times_sampled) + ", rate_limiter=" + c.rate_limiter.ToString() + ")";
      });
}

}  // namespace resound::bindings

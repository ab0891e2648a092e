// Checkpoint save / load / inspect (resound/checkpoint.h). The file work runs
// without the GIL; summaries come back as dicts.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "conversions.h"
#include "register.h"
#include "resound/checkpoint.h"
#include "resound/table.h"

namespace resound::bindings {
namespace {

py::dict SelectorDict(const SelectorOptions& options) {
  py::dict out;
  out["kind"] = options.kind_name();
  out["priority_exponent"] = options.priority_exponent;
  out["seed"] = options.seed.has_value() ? py::object(py::int_(*options.seed)) : py::object(py::none());
  return out;
}

py::dict SummaryDict(const CheckpointSummary& summary) {
  py::list tables;
  for (const auto& table : summary.tables) {
    py::dict entry;
    entry["name"] = table.config.name;
    entry["sampler"] = SelectorDict(table.config.sampler);
    entry["remover"] = SelectorDict(table.config.remover);
    entry["max_size"] = table.config.max_size;
    entry["max_times_sampled"] = table.config.max_times_sampled;
    entry["rate_limiter"] = table.config.rate_limiter.ToString();
    const RateLimiterConfig& limiter = table.config.rate_limiter;
    py::dict limiter_options;
    limiter_options["samples_per_insert"] = limiter.samples_per_insert;
    limiter_options["min_size_to_sample"] = limiter.min_size_to_sample;
    limiter_options["min_diff"] = limiter.min_diff;
    limiter_options["max_diff"] = limiter.max_diff;
    entry["rate_limiter_options"] = std::move(limiter_options);
    entry["signature"] = py::bytes(table.config.signature);
    entry["num_items"] = table.num_items;
    entry["insert_count"] = table.counters.inserts;
    entry["sample_count"] = table.counters.samples;
    entry["delete_count"] = table.counters.deletes;
    entry["num_deleted_episodes"] = table.num_deleted_episodes;
    entry["num_unique_samples"] = table.num_unique_samples;
    tables.append(std::move(entry));
  }
  py::list files;
  for (const auto& file : summary.files) {
    py::dict entry;
    entry["name"] = file.name;
    entry["tables"] = file.tables;
    entry["reused"] = file.reused;
    entry["bytes"] = file.bytes;
    files.append(std::move(entry));
  }
  py::dict out;
  out["tables"] = std::move(tables);
  out["files"] = std::move(files);
  out["num_chunks"] = summary.num_chunks;
  out["chunk_bytes"] = summary.chunk_bytes;
  out["file_bytes"] = summary.file_bytes;
  return out;
}

std::vector<Table*> Raw(const std::vector<std::shared_ptr<Table>>& tables) {
  std::vector<Table*> raw;
  for (const auto& table : tables) {
    if (!table) throw py::value_error("tables: None is not a table");
    raw.push_back(table.get());
  }
  return raw;
}

// Runs `work` (which returns a summary) without the GIL; the summary as a dict.
template <typename Work>
py::dict Summarize(Work&& work) {
  CheckpointSummary summary;
  {
    py::gil_scoped_release release;
    summary = work();
  }
  return SummaryDict(summary);
}

}  // namespace

void RegisterCheckpoint(py::module_& m) {
  m.def(
      "save_checkpoint",
      [](const std::vector<std::shared_ptr<Table>>& tables, const std::string& path) {
        const std::vector<Table*> raw = Raw(tables);
        return Summarize([&] { return Checkpoint::Save(raw, path); });
      },
      py::arg("tables"), py::arg("path"),
      R"doc(Writes the tables into a new checkpoint file `path` (atomically: the file
appears complete or not at all). Only references are taken under each table's
lock; inserts and samples go on while the file is written. Returns a summary
dict (tables, num_chunks, chunk_bytes, file_bytes).)doc");
  m.def(
      "save_checkpoint_directory",
      [](const std::vector<std::shared_ptr<Table>>& tables, const std::string& directory, const std::string& previous,
         const std::vector<std::string>& unchanged) {
        const std::vector<Table*> raw = Raw(tables);
        return Summarize([&] { return Checkpoint::SaveDirectory(raw, directory, previous, unchanged); });
      },
      py::arg("tables"), py::arg("directory"), py::arg("previous") = "",
      py::arg("unchanged") = std::vector<std::string>{},
      R"doc(Writes the tables as a checkpoint directory into the existing `directory`: each
group of tables sharing no chunk with the others in a file tables-<k>.rsnd, then
the manifest checkpoint.rsnd, last. A group whose tables are all named in
`unchanged` and that the checkpoint directory `previous` holds in a file of the
same tables is hard-linked from there instead. Returns the summary dict, whose
`files` lists each table file (name, tables, reused, bytes).)doc");
  m.def(
      "load_checkpoint",
      [](const std::string& path, const std::vector<std::shared_ptr<Table>>& tables) {
        const std::vector<Table*> raw = Raw(tables);
        return Summarize([&] { return Checkpoint::Load(path, raw); });
      },
      py::arg("path"), py::arg("tables"),
      R"doc(Restores checkpoint `path` (a file, or a directory's manifest) into `tables` (matched by name; each must be empty
and configured like the saved one). All or nothing. CheckpointError for a
damaged or foreign file, ValueError / RuntimeError for a mismatch, OSError if
it cannot be read.)doc");
  m.def(
      "inspect_checkpoint",
      [](const std::string& path) { return Summarize([&] { return Checkpoint::Inspect(path); }); },
      py::arg("path"), "Reads and checks a whole checkpoint file; returns its summary dict.");
  m.def(
      "read_checkpoint_tables",
      [](const std::string& path) { return Summarize([&] { return Checkpoint::ReadTables(path); }); },
      py::arg("path"),
      "The table records of a checkpoint file (configurations, counters), without reading its chunks; "
      "a summary dict whose num_chunks, chunk_bytes and file_bytes are 0.");
}

}  // namespace resound::bindings

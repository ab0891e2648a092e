#include "conversions.h"

#include <pybind11/stl.h>

#include "resound/errors.h"

namespace resound::bindings {
namespace {

int64_t ToInt64(py::handle value, const std::string& argument) {
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) {
    PyErr_Clear();
    throw InvalidArgumentError(argument + " must be an integer, got " +
                               std::string(py::str(py::type::of(value).attr("__name__"))));
  }
  const long long result = PyLong_AsLongLong(index.ptr());
  if (result == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    throw InvalidArgumentError(argument + " is out of the int64 range");
  }
  return result;
}

}  // namespace

uint64_t ToKey(py::handle value, const char* argument) {
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) {
    PyErr_Clear();
    throw InvalidArgumentError(std::string(argument) + " must be an integer in [0, 2**64), got " +
                               std::string(py::str(py::type::of(value).attr("__name__"))));
  }
  const unsigned long long result = PyLong_AsUnsignedLongLong(index.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw InvalidArgumentError(std::string(argument) + " must be an integer in [0, 2**64), got " +
                               std::string(py::str(index)));
  }
  return result;
}

double ToDouble(py::handle value, const std::string& argument) {
  const double result = PyFloat_AsDouble(value.ptr());
  if (result == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    throw InvalidArgumentError(argument + " must be a number, got " +
                               std::string(py::str(py::type::of(value).attr("__name__"))));
  }
  return result;
}

Deadline ToDeadline(std::optional<double> timeout) { return Deadline::FromTimeout(timeout); }

Trajectory ToTrajectory(py::handle value, const char* argument) {
  const std::string name(argument);
  if (!py::isinstance<py::sequence>(value) || py::isinstance<py::str>(value)) {
    throw InvalidArgumentError(name + " must be a sequence of columns (slices, squeeze)");
  }
  Trajectory trajectory;
  const auto columns = py::reinterpret_borrow<py::sequence>(value);
  trajectory.reserve(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    const std::string where = name + "[" + std::to_string(c) + "]";
    py::object column = columns[c];
    if (!py::isinstance<py::sequence>(column) || py::len(column) != 2) {
      throw InvalidArgumentError(where + " must be a pair (slices, squeeze)");
    }
    const auto pair = py::reinterpret_borrow<py::sequence>(column);
    py::object slices = pair[0];
    if (!py::isinstance<py::sequence>(slices)) {
      throw InvalidArgumentError(where + "[0] must be a sequence of (chunk_key, offset, length)");
    }
    TrajectoryColumn out;
    const int squeeze = PyObject_IsTrue(py::object(pair[1]).ptr());
    if (squeeze < 0) throw py::error_already_set();
    out.squeeze = squeeze != 0;
    const auto slice_list = py::reinterpret_borrow<py::sequence>(slices);
    out.slices.reserve(slice_list.size());
    for (size_t s = 0; s < slice_list.size(); ++s) {
      const std::string slice_where = where + "[0][" + std::to_string(s) + "]";
      py::object slice = slice_list[s];
      if (!py::isinstance<py::sequence>(slice) || py::len(slice) != 3) {
        throw InvalidArgumentError(slice_where + " must be a triple (chunk_key, offset, length)");
      }
      const auto triple = py::reinterpret_borrow<py::sequence>(slice);
      out.slices.push_back({ToKey(triple[0], (slice_where + ".chunk_key").c_str()),
                            ToInt64(triple[1], slice_where + ".offset"),
                            ToInt64(triple[2], slice_where + ".length")});
    }
    trajectory.push_back(std::move(out));
  }
  return trajectory;
}

py::list FromTrajectory(const Trajectory& trajectory) {
  py::list columns;
  for (const TrajectoryColumn& column : trajectory) {
    py::list slices;
    for (const ChunkSlice& slice : column.slices) {
      slices.append(py::make_tuple(slice.chunk_key, slice.offset, slice.length));
    }
    columns.append(py::make_tuple(std::move(slices), column.squeeze));
  }
  return columns;
}

py::dict RateLimiterInfoDict(const RateLimiterInfo& info) {
  py::dict out;
  out["samples_per_insert"] = info.config.samples_per_insert;
  out["min_size_to_sample"] = info.config.min_size_to_sample;
  out["min_diff"] = info.config.min_diff;
  out["max_diff"] = info.config.max_diff;
  out["inserts"] = info.counters.inserts;
  out["samples"] = info.counters.samples;
  out["deletes"] = info.counters.deletes;
  out["waiting_inserts"] = info.waiting_inserts;
  out["waiting_samples"] = info.waiting_samples;
  out["blocked_inserts"] = info.blocked_inserts;
  out["blocked_samples"] = info.blocked_samples;
  return out;
}

}  // namespace resound::bindings

#include "conversions.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "resound/errors.h"

namespace resound::bindings {
namespace {

std::string TypeName(py::handle value) { return py::str(py::type::of(value).attr("__name__")); }

}  // namespace

// The Parse* functions report failure by returning false (with no Python
// error set), so that callers spell out where the value was only on error:
// building those strings for every value would cost more than the parse.
bool ParseKey(py::handle value, uint64_t& out) {
  PyObject* number = value.ptr();
  py::object index;
  if (!PyLong_CheckExact(number)) {
    index = py::reinterpret_steal<py::object>(PyNumber_Index(number));
    if (!index) {
      PyErr_Clear();
      return false;
    }
    number = index.ptr();
  }
  // Keys are random 64-bit numbers, past a single digit of CPython's ints,
  // where PyLong_AsUnsignedLongLong goes through a generic byte-array
  // conversion (a tenth of a 100-key priority update's client time over
  // the same-host transport). The masking conversion is a loop over the
  // digits; the sign and the width, both read off the int, make it exact.
  if (_PyLong_Sign(number) < 0) return false;
  const size_t bits = _PyLong_NumBits(number);
  if (bits == static_cast<size_t>(-1)) {  // more bits than a size_t counts
    PyErr_Clear();
    return false;
  }
  if (bits > 64) return false;
  out = PyLong_AsUnsignedLongLongMask(number);
  return true;
}

bool ParseInt64(py::handle value, int64_t& out) {
  long long result = 0;
  if (PyLong_CheckExact(value.ptr())) {
    result = PyLong_AsLongLong(value.ptr());
  } else {
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
    if (!index) {
      PyErr_Clear();
      return false;
    }
    result = PyLong_AsLongLong(index.ptr());
  }
  if (result == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  out = result;
  return true;
}

bool ParseDouble(py::handle value, double& out) {
  out = PyFloat_CheckExact(value.ptr()) ? PyFloat_AS_DOUBLE(value.ptr()) : PyFloat_AsDouble(value.ptr());
  if (out == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

int64_t ToInt64(py::handle value, const std::string& argument) {
  int64_t result = 0;
  if (!ParseInt64(value, result)) {
    throw InvalidArgumentError(argument + " must be an integer in the int64 range, got " + TypeName(value));
  }
  return result;
}

uint64_t ToKey(py::handle value, const char* argument) {
  uint64_t result = 0;
  if (!ParseKey(value, result)) {
    throw InvalidArgumentError(std::string(argument) + " must be an integer in [0, 2**64), got " +
                               std::string(py::repr(value)));
  }
  return result;
}

double ToDouble(py::handle value, const char* argument) {
  double result = 0;
  if (!ParseDouble(value, result)) {
    throw InvalidArgumentError(std::string(argument) + " must be a number, got " + TypeName(value));
  }
  return result;
}

Deadline ToDeadline(std::optional<double> timeout) { return Deadline::FromTimeout(timeout); }

Trajectory ToTrajectory(py::handle value, const char* argument) {
  if (!py::isinstance<py::sequence>(value) || py::isinstance<py::str>(value)) {
    throw InvalidArgumentError(std::string(argument) + " must be a sequence of columns (slices, squeeze)");
  }
  const auto column_at = [&](size_t c) { return std::string(argument) + "[" + std::to_string(c) + "]"; };
  Trajectory trajectory;
  const auto columns = py::reinterpret_borrow<py::sequence>(value);
  trajectory.reserve(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    py::object column = columns[c];
    if (!py::isinstance<py::sequence>(column) || py::len(column) != 2) {
      throw InvalidArgumentError(column_at(c) + " must be a pair (slices, squeeze)");
    }
    const auto pair = py::reinterpret_borrow<py::sequence>(column);
    py::object slices = pair[0];
    if (!py::isinstance<py::sequence>(slices)) {
      throw InvalidArgumentError(column_at(c) + "[0] must be a sequence of (chunk_key, offset, length)");
    }
    TrajectoryColumn out;
    const int squeeze = PyObject_IsTrue(py::object(pair[1]).ptr());
    if (squeeze < 0) throw py::error_already_set();
    out.squeeze = squeeze != 0;
    const auto slice_list = py::reinterpret_borrow<py::sequence>(slices);
    out.slices.reserve(slice_list.size());
    for (size_t s = 0; s < slice_list.size(); ++s) {
      const auto slice_at = [&] { return column_at(c) + "[0][" + std::to_string(s) + "]"; };
      py::object slice = slice_list[s];
      if (!py::isinstance<py::sequence>(slice) || py::len(slice) != 3) {
        throw InvalidArgumentError(slice_at() + " must be a triple (chunk_key, offset, length)");
      }
      const auto triple = py::reinterpret_borrow<py::sequence>(slice);
      ChunkSlice parsed;
      if (!ParseKey(triple[0], parsed.chunk_key)) {
        throw InvalidArgumentError(slice_at() + ".chunk_key must be an integer in [0, 2**64)");
      }
      if (!ParseInt64(triple[1], parsed.offset)) {
        throw InvalidArgumentError(slice_at() + ".offset must be an integer in the int64 range");
      }
      if (!ParseInt64(triple[2], parsed.length)) {
        throw InvalidArgumentError(slice_at() + ".length must be an integer in the int64 range");
      }
      out.slices.push_back(parsed);
    }
    trajectory.push_back(std::move(out));
  }
  return trajectory;
}

py::list FromTrajectory(Item::TrajectoryView trajectory) {
  py::list columns;
  for (size_t c = 0; c < trajectory.size(); ++c) {
    const Item::ColumnView column = trajectory[c];
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
  out["blocked_insert_seconds"] = info.blocked_insert_seconds;
  out["blocked_sample_seconds"] = info.blocked_sample_seconds;
  return out;
}

// Priority updates from a dict {key: priority}, a pair of equally long arrays
// (keys, priorities), or an iterable of (key, priority) pairs.
std::vector<std::pair<uint64_t, double>> ToUpdates(const py::object& updates) {
  std::vector<std::pair<uint64_t, double>> out;
  if (PyDict_Check(updates.ptr())) {
    out.reserve(static_cast<size_t>(PyDict_Size(updates.ptr())));
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    Py_ssize_t position = 0;
    while (PyDict_Next(updates.ptr(), &position, &key, &value)) {
      std::pair<uint64_t, double> entry;
      if (!ParseKey(key, entry.first)) {
        throw InvalidArgumentError("updates key must be an integer in [0, 2**64), got " +
                                   std::string(py::repr(key)));
      }
      if (!ParseDouble(value, entry.second)) {
        throw InvalidArgumentError("updates priority must be a number, got " + std::string(py::repr(value)));
      }
      out.push_back(entry);
    }
    return out;
  }
  if (py::isinstance<py::tuple>(updates) && py::len(updates) == 2) {
    const auto pair = py::reinterpret_borrow<py::tuple>(updates);
    if (py::isinstance<py::array>(pair[0]) && py::isinstance<py::array>(pair[1])) {
      const auto keys = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(pair[0]);
      const auto priorities = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(pair[1]);
      if (!keys || !priorities || keys.ndim() != 1 || priorities.ndim() != 1 || keys.size() != priorities.size()) {
        PyErr_Clear();
        throw InvalidArgumentError(
            "updates given as (keys, priorities) must be two 1-D arrays of equal length (uint64 keys, float "
            "priorities)");
      }
      out.reserve(static_cast<size_t>(keys.size()));
      for (py::ssize_t i = 0; i < keys.size(); ++i) out.emplace_back(keys.data()[i], priorities.data()[i]);
      return out;
    }
  }
  py::object pairs = py::isinstance<py::dict>(updates) ? updates.attr("items")() : updates;
  for (py::handle entry : pairs) {
    if (!py::isinstance<py::sequence>(entry) || py::len(entry) != 2) {
      throw InvalidArgumentError(
          "updates must be a dict {key: priority}, a pair of arrays (keys, priorities) or (key, priority) pairs");
    }
    const auto pair = py::reinterpret_borrow<py::sequence>(entry);
    out.emplace_back(ToKey(pair[0], "updates key"), ToDouble(pair[1], "updates priority"));
  }
  return out;
}

std::vector<uint64_t> ToKeys(py::handle keys, const char* argument) {
  std::vector<uint64_t> out;
  for (py::handle key : keys) out.push_back(ToKey(key, argument));
  return out;
}

}  // namespace resound::bindings

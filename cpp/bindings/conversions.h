// Conversions between Python values and core types, shared by the
// register_*.cc files. Each conversion names the argument it checks so that a
// bad value becomes a ValueError saying which argument and what is allowed.
#ifndef RESOUND_BINDINGS_CONVERSIONS_H_
#define RESOUND_BINDINGS_CONVERSIONS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>
#include <string>

#include "resound/chunk.h"
#include "resound/deadline.h"
#include "resound/item.h"
#include "resound/rate_limiter.h"
#include "resound/trajectory.h"

namespace resound::bindings {

namespace py = pybind11;

// Parsers that return false (Python error cleared) instead of throwing, for
// loops that name the failing element only when one fails.
bool ParseKey(py::handle value, uint64_t& out);
bool ParseInt64(py::handle value, int64_t& out);
bool ParseDouble(py::handle value, double& out);

// An int (or anything with __index__, e.g. numpy integers) in [0, 2**64).
uint64_t ToKey(py::handle value, const char* argument);

// An int in the int64 range.
int64_t ToInt64(py::handle value, const std::string& argument);

// A real number (int, float, numpy scalar); anything else is a ValueError
// naming `argument`. Range checks are the core's.
double ToDouble(py::handle value, const char* argument);

// Priority updates from a dict {key: priority}, a pair of equally long 1-D
// arrays (keys, priorities), or an iterable of (key, priority) pairs.
std::vector<std::pair<uint64_t, double>> ToUpdates(const py::object& updates);
// Keys from any iterable of them (mutate_priorities' deletes, a step's item
// keys); errors name `argument`.
std::vector<uint64_t> ToKeys(py::handle keys, const char* argument);

// None -> wait forever; a number of seconds >= 0 otherwise.
Deadline ToDeadline(std::optional<double> timeout);

// A trajectory is a sequence of columns; a column is a pair
// (slices, squeeze) where slices is a sequence of (chunk_key, offset, length).
Trajectory ToTrajectory(py::handle value, const char* argument);
py::list FromTrajectory(Item::TrajectoryView trajectory);

// pybind11 holds chunks as shared_ptr<Chunk>; the core hands out
// shared_ptr<const Chunk>. The cast keeps the store's deleter.
inline std::shared_ptr<Chunk> Hold(std::shared_ptr<const Chunk> chunk) {
  return std::const_pointer_cast<Chunk>(std::move(chunk));
}

// Limiter configuration, counters and waiting statistics as a dict.
py::dict RateLimiterInfoDict(const RateLimiterInfo& info);

}  // namespace resound::bindings

#endif  // RESOUND_BINDINGS_CONVERSIONS_H_

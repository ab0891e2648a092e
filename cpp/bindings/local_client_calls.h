// The same-host client's calls that do more than send bytes and return
// bytes: mutate_priorities (a packed request written straight into the upload
// region) and sample_gathered (a batch gathered by the server into numpy
// arrays, or into a batch region the arrays then view).
#ifndef RESOUND_BINDINGS_LOCAL_CLIENT_CALLS_H_
#define RESOUND_BINDINGS_LOCAL_CLIENT_CALLS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "resound/local/local_client.h"
#include "resound/local/shared_memory.h"

namespace resound::bindings {

namespace py = pybind11;

// What the arrays of a batch in a batch region hold (their numpy base): the
// region stays mapped, and is not lent again, while any of them lives.
struct BatchRegionHold {
  std::shared_ptr<local::SharedMemory> region;
};

// LocalClient.mutate_priorities: the request written straight into the
// upload region (packed, see PackedMutateRequest), sent and its answer read
// in one call (a learner's most frequent small call, where the bytes
// objects and the response message on the way cost a tenth of it).
py::tuple MutatePriorities(local::LocalClient& client, const std::string& table, const py::object& updates,
                           const py::object& deletes, std::optional<double> timeout);

// LocalClient.sample_gathered: see its docstring.
py::tuple SampleGathered(local::LocalClient& client, py::handle request, int64_t num_samples,
                         std::optional<double> timeout);

}  // namespace resound::bindings

#endif  // RESOUND_BINDINGS_LOCAL_CLIENT_CALLS_H_

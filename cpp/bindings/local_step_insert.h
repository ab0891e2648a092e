// LocalClient.insert_step and insert_step_wait: client.insert over the
// same-host transport in one call on a pooled connection (see
// resound/local/step_insert_request.h), where the general path went through
// a client chunk, an insert encoder and a stream's Python layers, which cost
// more than the round trip itself.
#ifndef RESOUND_BINDINGS_LOCAL_STEP_INSERT_H_
#define RESOUND_BINDINGS_LOCAL_STEP_INSERT_H_

#include <pybind11/pybind11.h>

#include <cstddef>
#include <optional>
#include <utility>

#include "resound/local/local_client.h"

namespace resound::bindings {

namespace py = pybind11;

// Sends the step (`arrays`: C-contiguous numpy arrays, one chunk each, keyed
// by `chunk_keys`; `items`: (table, key, priority) triples) and waits up to
// `wait` seconds (None: until done) for the server's answer. Returns (how
// many items it confirmed, whether its answer ended): unended when `wait`
// ran out (the request stays pending: insert_step_wait goes on).
std::pair<size_t, bool> InsertStep(local::LocalClient& client, const py::list& items, const py::list& arrays,
                                   const py::list& chunk_keys, py::handle episode_id, std::optional<double> wait);

// Waits up to `wait` seconds more for the rest of the answer for the step's
// items `item_keys`, `confirmed` of which came already; returns as
// InsertStep.
std::pair<size_t, bool> InsertStepWait(local::LocalClient& client, const py::list& item_keys, size_t confirmed,
                                       std::optional<double> wait);

}  // namespace resound::bindings

#endif  // RESOUND_BINDINGS_LOCAL_STEP_INSERT_H_

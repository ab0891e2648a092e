// What the same-host transport's bindings share (register_local.cc,
// local_step_insert.cc, local_client_calls.cc): running work without the GIL.
#ifndef RESOUND_BINDINGS_LOCAL_CLIENT_SUPPORT_H_
#define RESOUND_BINDINGS_LOCAL_CLIENT_SUPPORT_H_

#include <Python.h>

#include <cstddef>
#include <exception>
#include <optional>
#include <utility>

#include "resound/deadline.h"
#include "resound/local/local_client.h"

namespace resound::bindings {

// Runs `work` without the GIL and takes it back in plain code, not in a
// destructor: a daemon thread (a stream's) that returns while the
// interpreter finalizes is ended inside PyEval_RestoreThread by a forced
// unwind, which passes through here (and pybind11) but would terminate the
// process from a destructor (gil_scoped_release's), which is noexcept.
template <typename Work>
auto WithoutGil(Work&& work) {
  std::optional<decltype(work())> result;
  std::exception_ptr error;
  PyThreadState* state = PyEval_SaveThread();
  try {
    result.emplace(work());
  } catch (...) {
    error = std::current_exception();
  }
  PyEval_RestoreThread(state);
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

}  // namespace resound::bindings

#endif  // RESOUND_BINDINGS_LOCAL_CLIENT_SUPPORT_H_

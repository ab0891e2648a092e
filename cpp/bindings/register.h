// One registration function per concept; module.cc calls them in order.
#ifndef RESOUND_BINDINGS_REGISTER_H_
#define RESOUND_BINDINGS_REGISTER_H_

#include <pybind11/pybind11.h>

#include <cstddef>
#include <exception>

namespace resound::bindings {

namespace py = pybind11;

void RegisterErrors(py::module_& m);
void RegisterChunks(py::module_& m);
void RegisterSelectors(py::module_& m);
void RegisterRateLimiter(py::module_& m);
void RegisterTable(py::module_& m);
void RegisterWire(py::module_& m);
void RegisterVectorWriter(py::module_& m);
void RegisterMemory(py::module_& m);
void RegisterCheckpoint(py::module_& m);
void RegisterLocal(py::module_& m);  // with RESOUND_HAVE_LOCAL_TRANSPORT only

// Raises the Python translation of `error` with `num_applied` attached as the
// exception's `num_inserted` attribute (for batch inserts that stopped early).
[[noreturn]] void RaiseWithProgress(std::exception_ptr error, size_t num_applied);

}  // namespace resound::bindings

#endif  // RESOUND_BINDINGS_REGISTER_H_

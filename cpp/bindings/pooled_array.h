// numpy arrays whose memory comes from the shared BlockPool (see
// resound/block_pool.h): large batch outputs reuse buffers that are already
// mapped instead of page-faulting through fresh ones on every call.
#ifndef RESOUND_BINDINGS_POOLED_ARRAY_H_
#define RESOUND_BINDINGS_POOLED_ARRAY_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <vector>

namespace resound::bindings {

namespace py = pybind11;

// An uninitialised, writable, C-contiguous array that owns its buffer (64-byte
// aligned): the buffer returns to the pool when the array (and every view of
// it) is gone.
py::array PooledArray(const py::dtype& dtype, const std::vector<py::ssize_t>& shape);

}  // namespace resound::bindings

#endif  // RESOUND_BINDINGS_POOLED_ARRAY_H_

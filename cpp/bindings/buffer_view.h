// A contiguous read-only view of a Python buffer, held while C++ copies from
// it (the view keeps the exporter from resizing the buffer meanwhile).
#ifndef RESOUND_BINDINGS_BUFFER_VIEW_H_
#define RESOUND_BINDINGS_BUFFER_VIEW_H_

#include <pybind11/pybind11.h>

#include <cstddef>
#include <string>

#include "resound/errors.h"

namespace resound::bindings {

namespace py = pybind11;

// Copies up to this size run with the GIL held: a copy of a few KB takes less
// time than handing the GIL to another thread and queueing to get it back.
constexpr size_t kKeepGilBelowBytes = 64 * 1024;

class BufferView {
 public:
  explicit BufferView(py::handle object) {
    if (PyObject_GetBuffer(object.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      throw InvalidArgumentError("data must be a C-contiguous buffer (bytes, bytearray, memoryview "
                                 "or contiguous numpy array), got " +
                                 std::string(py::str(py::type::of(object).attr("__name__"))));
    }
  }
  ~BufferView() { PyBuffer_Release(&view_); }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;
  const void* data() const noexcept { return view_.buf; }
  size_t size() const noexcept { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
};

}  // namespace resound::bindings

#endif  // RESOUND_BINDINGS_BUFFER_VIEW_H_

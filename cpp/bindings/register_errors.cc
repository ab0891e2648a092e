// Maps core exceptions to Python ones:
//   InvalidArgumentError -> ValueError       NotFoundError -> KeyError
//   DeadlineExceededError -> DeadlineExceededError (a ReverbError and a TimeoutError)
//   CancelledError -> CancelledError (a ReverbError and a RuntimeError)
//   FailedPreconditionError -> RuntimeError
#include <pybind11/pybind11.h>

#include <system_error>

#include "register.h"
#include "resound/errors.h"

namespace resound::bindings {
namespace {

// Module-lifetime references; the module is never unloaded.
PyObject* g_reverb_error = nullptr;
PyObject* g_deadline_exceeded = nullptr;
PyObject* g_cancelled = nullptr;
PyObject* g_checkpoint_error = nullptr;

PyObject* NewException(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("resound._core.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.attr(name) = py::handle(type);
  return type;
}

// Sets the Python error for the exception currently being handled and
// returns its type, or nullptr if it is not one of ours.
PyObject* TypeFor(std::exception_ptr error, std::string& message) {
  try {
    std::rethrow_exception(error);
  } catch (const InvalidArgumentError& e) {
    message = e.what();
    return PyExc_ValueError;
  } catch (const NotFoundError& e) {
    message = e.what();
    return PyExc_KeyError;
  } catch (const DeadlineExceededError& e) {
    message = e.what();
    return g_deadline_exceeded;
  } catch (const CancelledError& e) {
    message = e.what();
    return g_cancelled;
  } catch (const FailedPreconditionError& e) {
    message = e.what();
    return PyExc_RuntimeError;
  } catch (const DataLossError& e) {
    message = e.what();
    return g_checkpoint_error;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

void RegisterErrors(py::module_& m) {
  g_reverb_error = NewException(m, "ReverbError", PyExc_Exception,
                                "Base class of resound's own errors (named as in Reverb).");
  // Also a TimeoutError, so that code catching Python's own timeout (as for
  // sockets and futures) catches this one as well.
  py::tuple deadline_bases = py::make_tuple(py::handle(g_reverb_error), py::handle(PyExc_TimeoutError));
  g_deadline_exceeded = NewException(m, "DeadlineExceededError", deadline_bases.ptr(),
                                     "A blocking call reached its timeout before it could act.");
  py::tuple cancelled_bases = py::make_tuple(py::handle(g_reverb_error), py::handle(PyExc_RuntimeError));
  g_cancelled = NewException(m, "CancelledError", cancelled_bases.ptr(),
                             "The table was closed (server stopping) while or before the call ran.");
  py::tuple checkpoint_bases = py::make_tuple(py::handle(g_reverb_error), py::handle(PyExc_ValueError));
  g_checkpoint_error = NewException(m, "CheckpointError", checkpoint_bases.ptr(),
                                    "A checkpoint file is truncated, corrupted, foreign or of an unknown version.");
  py::register_exception_translator([](std::exception_ptr error) {
    if (!error) return;
    try {
      std::rethrow_exception(error);
    } catch (const std::system_error& e) {
      // File errors keep their errno: OSError(errno, message).
      py::object os_error = py::reinterpret_borrow<py::object>(PyExc_OSError)(e.code().value(), e.what());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(os_error.ptr())), os_error.ptr());
      return;
    } catch (...) {
    }
    std::string message;
    PyObject* type = TypeFor(error, message);
    if (type == nullptr) std::rethrow_exception(error);  // pybind11's own translators
    PyErr_SetString(type, message.c_str());
  });
}

void RaiseWithProgress(std::exception_ptr error, size_t num_applied) {
  std::string message;
  PyObject* type = TypeFor(error, message);
  if (type == nullptr) std::rethrow_exception(error);
  py::object exception = py::reinterpret_borrow<py::object>(type)(message);
  exception.attr("num_inserted") = num_applied;
  PyErr_SetObject(type, exception.ptr());
  throw py::error_already_set();
}

}  // namespace resound::bindings

// resound._core: the C++ core's Python face. Only marshalling lives in the
// bindings; behaviour lives in cpp/resound.
#include <pybind11/pybind11.h>

#include "register.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "resound's C++ core: chunk store, selectors, rate limiters and tables.";
  resound::bindings::RegisterErrors(m);
  resound::bindings::RegisterChunks(m);
  resound::bindings::RegisterSelectors(m);
  resound::bindings::RegisterRateLimiter(m);
  resound::bindings::RegisterTable(m);
  resound::bindings::RegisterWire(m);
  resound::bindings::RegisterVectorWriter(m);
  resound::bindings::RegisterMemory(m);
  resound::bindings::RegisterCheckpoint(m);
#ifdef RESOUND_HAVE_LOCAL_TRANSPORT
  resound::bindings::RegisterLocal(m);
  m.attr("HAS_LOCAL_TRANSPORT") = true;
#else
  m.attr("HAS_LOCAL_TRANSPORT") = false;
#endif
}

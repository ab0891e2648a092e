// resound._core.LocalServer / LocalClient: the same-host transport
// (resound/local, docs/local-transport.md). Marshalling only: the server's
// threads run without the GIL and take it only for a call the Python
// servicer answers (the fallback); the client releases it while it waits.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sys/types.h>

#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "buffer_view.h"
#include "conversions.h"
#include "local_client_calls.h"
#include "local_client_support.h"
#include "local_step_insert.h"
#include "register.h"
#include "resound/chunk_store.h"
#include "resound/deadline.h"
#include "resound/insert_request_encoder.h"
#include "resound/local/doorbell.h"
#include "resound/local/frame.h"
#include "resound/local/insert_exchange.h"
#include "resound/local/local_client.h"
#include "resound/local/local_server.h"
#include "resound/local/replay_local_service.h"
#include "resound/local/status_codes.h"
#include "resound/table.h"

namespace resound::bindings {
namespace {

using local::LocalClient;
using local::LocalServer;
using local::StatusError;

// Module-lifetime reference; the module is never unloaded.
PyObject* g_local_status_error = nullptr;

// A Python callable that the server's threads call: held, called and let go
// with the GIL, whichever thread drops the last reference.
class PythonCallable {
 public:
  explicit PythonCallable(py::object callable) : callable_(std::move(callable)) {}
  PythonCallable(const PythonCallable&) = delete;
  PythonCallable& operator=(const PythonCallable&) = delete;
  ~PythonCallable() {
    if (!Py_IsInitialized()) {
      callable_.release();  // the interpreter is gone: nothing to decrement
      return;
    }
    py::gil_scoped_acquire gil;
    callable_ = py::object();
  }

  // fallback(method, request bytes) -> response bytes; a LocalStatusError it
  // raises becomes that status, any other exception UNKNOWN.
  std::string Call(uint32_t method, std::span<const std::byte> request) const {
    py::gil_scoped_acquire gil;
    try {
      py::bytes argument(reinterpret_cast<const char*>(request.data()), request.size());
      py::object result = callable_(method, argument);
      return result.cast<std::string>();
    } catch (py::error_already_set& error) {
      if (error.matches(g_local_status_error)) {
        py::tuple args = error.value().attr("args");
        throw StatusError(args[0].cast<uint32_t>(), args[1].cast<std::string>());
      }
      throw StatusError(local::kUnknown, error.what());
    }
  }

 private:
  py::object callable_;
};

// Stop()s without the GIL: the server's threads may be waiting for it.
struct StopWithoutGil {
  void operator()(LocalServer* server) const {
    {
      py::gil_scoped_release release;
      server->Stop();
    }
    std::default_delete<LocalServer>()(server);
  }
};

std::map<std::string, std::shared_ptr<Table>> TablesOf(const py::dict& tables) {
  std::map<std::string, std::shared_ptr<Table>> out;
  for (const auto& [name, table] : tables) {
    auto core = table.cast<std::shared_ptr<Table>>();
    if (!core) throw py::value_error("tables: None is not a table");
    out.emplace(name.cast<std::string>(), std::move(core));
  }
  return out;
}

// Copies `request` into the upload region (grown if it is smaller), sends
// it and waits for its answer. Called without the GIL.
LocalClient::Response CallWith(LocalClient& client, uint32_t method, std::span<const std::byte> request,
                               const Deadline& deadline) {
  client.EnsureRequestCapacity(request.size(), deadline);
  std::memcpy(client.request_buffer(), request.data(), request.size());
  return client.Call(method, request.size(), deadline);
}

// (payload as bytes, more) of a response.
py::tuple ResponseTuple(const LocalClient::Response& response) {
  return py::make_tuple(py::bytes(reinterpret_cast<const char*>(response.payload.data()), response.payload.size()),
                        response.more);
}

}  // namespace

void RegisterLocal(py::module_& m) {
  // The frame header's version (tests that write frames by hand use it).
  m.attr("LOCAL_FRAME_VERSION") = local::Frame::kVersion;
  m.attr("LOCAL_CONTROL_BYTES") = local::Doorbell::kControlBytes;
  m.def(
      "payload_arena_bytes_in_use",
      [] {
        const local::PayloadArena* arena = local::PayloadArena::Existing();
        return arena != nullptr ? arena->bytes_in_use() : 0;
      },
      "Bytes of this process's payload arena that chunks hold now (0 without one).");
  const std::string qualified = "resound._core.LocalStatusError";
  g_local_status_error = PyErr_NewExceptionWithDoc(
      qualified.c_str(), "A local call that ended with a status: args are (code, message), gRPC's codes.",
      PyExc_RuntimeError, nullptr);
  if (g_local_status_error == nullptr) throw py::error_already_set();
  m.attr("LocalStatusError") = py::handle(g_local_status_error);
  py::register_exception_translator([](std::exception_ptr error) {
    if (!error) return;
    try {
      std::rethrow_exception(error);
    } catch (const StatusError& e) {
      PyErr_SetObject(g_local_status_error, py::make_tuple(e.code(), std::string(e.what())).ptr());
    }
  });

  py::class_<LocalServer, std::unique_ptr<LocalServer, StopWithoutGil>>(m, "LocalServer", R"doc(
Serves tables to processes of this host over a Unix socket and shared memory
(docs/local-transport.md), on C++ threads: Insert and Sample in C++, every
other call through `fallback(method, request_bytes) -> response_bytes`.)doc")
      .def(py::init([](const std::string& path, const py::dict& tables, std::shared_ptr<ChunkStore> store,
                       std::optional<int64_t> max_bytes, const py::bytes& token, std::vector<uid_t> allowed_uids,
                       size_t max_connections, size_t max_region_bytes, py::object fallback) {
             auto callable = std::make_shared<PythonCallable>(std::move(fallback));
             auto service = std::make_shared<local::ReplayLocalService>(
                 std::move(store), max_bytes,
                 [callable](uint32_t method, std::span<const std::byte> request) {
                   return callable->Call(method, request);
                 });
             service->SetTables(TablesOf(tables));
             local::LocalServerOptions options;
             options.path = path;
             options.allowed_uids = std::move(allowed_uids);
             options.max_connections = max_connections;
             options.limits.max_region_bytes = max_region_bytes;
             options.token = token;
             auto server = std::unique_ptr<LocalServer, StopWithoutGil>(new LocalServer(std::move(options), service));
             return server;
           }),
           py::arg("path"), py::arg("tables"), py::arg("store"), py::arg("max_bytes"), py::arg("token"),
           py::arg("allowed_uids"), py::arg("max_connections"), py::arg("max_region_bytes"), py::arg("fallback"))
      .def("stop", &LocalServer::Stop, py::call_guard<py::gil_scoped_release>(),
           "Stops serving and ends every connection (idempotent).")
      .def_property_readonly("path", &LocalServer::path)
      .def_property_readonly("num_connections", &LocalServer::num_connections)
      .def_property_readonly("num_refused", &LocalServer::num_refused);

  py::class_<BatchRegionHold>(m, "LocalBatchRegion",
                              "What keeps a batch region of the local transport mapped: the base of its arrays.")
      .def_property_readonly("nbytes", [](const BatchRegionHold& hold) { return hold.region->size(); });

  py::class_<LocalClient>(m, "LocalClient", R"doc(
One connection to a LocalServer; one call at a time (a second thread at once is
refused). `call` and `continue_call` return (response bytes, more).)doc")
      .def(py::init([](const std::string& path, size_t upload_bytes, size_t download_bytes,
                       std::optional<double> timeout) {
             const Deadline deadline = ToDeadline(timeout);
             return WithoutGil(
                 [&] { return std::make_unique<LocalClient>(path, upload_bytes, download_bytes, deadline); });
           }),
           py::arg("path"), py::arg("upload_bytes"), py::arg("download_bytes"), py::arg("timeout") = py::none())
      .def_property_readonly("token",
                             [](const LocalClient& client) { return py::bytes(client.token()); })
      .def_property_readonly("broken", &LocalClient::broken)
      .def(
          "attach_arena",
          [](LocalClient& client, size_t arena_bytes, std::optional<double> timeout) {
            const Deadline deadline = ToDeadline(timeout);
            return WithoutGil([&] {
              local::PayloadArena* arena = local::PayloadArena::Process(arena_bytes);
              return arena != nullptr && client.AttachArena(*arena, deadline);
            });
          },
          py::arg("arena_bytes"), py::arg("timeout") = py::none(),
          R"doc(Has the server map this process's payload arena (made, of `arena_bytes`,
by the first call in the process) so that staged inserts name the payloads of
the large chunks built in it instead of carrying them. False if the process
has no arena, the server runs as another user, or it refuses one that large.)doc")
      .def_property_readonly("arena_attached", [](const LocalClient& client) { return client.arena() != nullptr; })
      .def_property_readonly("request_capacity", &LocalClient::request_capacity)
      .def_property_readonly("response_capacity", &LocalClient::response_capacity)
      .def(
          "call",
          [](LocalClient& client, uint32_t method, py::handle request, std::optional<double> timeout) {
            const BufferView view(request);
            const Deadline deadline = ToDeadline(timeout);
            const LocalClient::Response response = WithoutGil([&] {
              return CallWith(client, method, {static_cast<const std::byte*>(view.data()), view.size()}, deadline);
            });
            return ResponseTuple(response);
          },
          py::arg("method"), py::arg("request"), py::arg("timeout") = py::none(),
          "Sends one request and waits for its answer: (response bytes, more).")
      .def(
          "stage_insert",
          [](LocalClient& client, InsertRequestEncoder& encoder, size_t max_items, size_t max_bytes) {
            // Without the GIL: copying a message's chunk payloads (~400 KB
            // for 100 items of 4 KB) held it for ~9 % of a writer's time,
            // which its own thread then waited for. The encoder's users are
            // serialized by the insert stream's lock, which is held around
            // this call and around every other use of the encoder.
            return WithoutGil([&] { return local::StageInsert(client, encoder, {max_items, max_bytes}); });
          },
          py::arg("encoder"), py::arg("max_items"), py::arg("max_bytes"),
          R"doc(Writes the encoder's next insert message straight into this connection's
upload region, its chunk payloads apart after it (so that the server copies
them once, into its chunk store), for call_staged or start(data_tail=True);
returns its size.)doc")
      .def(
          "exchange_insert",
          [](LocalClient& client, uint32_t method, InsertRequestEncoder& encoder, size_t keep, size_t max_items,
             size_t max_bytes, std::optional<double> wait) {
            // (The insert stream's lock is held, as for stage_insert.)
            const Deadline deadline = ToDeadline(wait);
            const local::ExchangeOutcome outcome = WithoutGil([&] {
              return local::ExchangeInsert(client, method, encoder, keep, {max_items, max_bytes}, deadline);
            });
            return py::make_tuple(outcome.confirmed, outcome.sent, outcome.awaiting);
          },
          py::arg("method"), py::arg("encoder"), py::arg("keep"), py::arg("max_items"), py::arg("max_bytes"),
          py::arg("wait") = py::none(),
          R"doc(A writer's turn on an insert stream of `method`: reads the answer to the
message on its way (waiting up to `wait` seconds for it) and confirms its
items, sends the queued ones (stage_insert, start), until at most `keep`
items are queued or unconfirmed, then sends what is still queued ahead (an
answer in parts: asks for the rest). Returns (items confirmed, whether it
sent a message, whether a request's answer is still to read). Not after an
answer in parts whose rest was not asked for.)doc")
      .def(
          "call_staged",
          [](LocalClient& client, uint32_t method, size_t size, std::optional<double> timeout) {
            if (size > client.request_capacity()) throw py::value_error("size: more than the staged request holds");
            const Deadline deadline = ToDeadline(timeout);
            const LocalClient::Response response = WithoutGil(
                [&] { return client.Call(method, size, deadline, {}, client.staged_layout()); });
            return ResponseTuple(response);
          },
          py::arg("method"), py::arg("size"), py::arg("timeout") = py::none(),
          "call() of the request of `size` bytes already in the upload region (stage_insert's).")
      .def(
          "start",
          // The GIL stays held: one 40-byte frame on a socket with at most
          // one request in flight never blocks, and releasing and taking the
          // GIL back costs more (~15 us measured) than the send itself.
          [](LocalClient& client, uint32_t method, size_t size, bool data_tail) {
            client.Start(method, size, data_tail ? client.staged_layout() : LocalClient::Layout::kMessage);
          },
          py::arg("method"), py::arg("size"), py::arg("data_tail") = false,
          "Sends the request of `size` bytes already in the upload region (method 0: the next part of the "
          "last answer; data_tail: stage_insert's) without waiting for its answer: finish() reads it.")
      .def(
          "finish",
          [](LocalClient& client, std::optional<double> timeout) -> py::object {
            const Deadline deadline = ToDeadline(timeout);
            const std::optional<LocalClient::Response> response =
                WithoutGil([&] { return client.Finish(deadline); });
            if (!response) return py::none();
            return ResponseTuple(*response);
          },
          py::arg("timeout") = py::none(),
          "The answer of the request start() sent: (response bytes, more), or None if it did not come "
          "within `timeout` (the request stays pending; the connection stays usable).")
      .def(
          "continue_call",
          [](LocalClient& client, std::optional<double> timeout) {
            const Deadline deadline = ToDeadline(timeout);
            const LocalClient::Response response = WithoutGil([&] { return client.Continue(deadline); });
            return ResponseTuple(response);
          },
          py::arg("timeout") = py::none(), "The next part of the last request's answer (after more).")
      .def("mutate_priorities", &MutatePriorities, py::arg("table"), py::arg("updates"), py::arg("deletes"),
           py::arg("timeout") = py::none(),
           "MutatePriorities on this connection: (num_updated, num_deleted). LocalStatusError with the "
           "server's status if it refused.")
      .def("insert_step", &InsertStep, py::arg("items"), py::arg("arrays"), py::arg("chunk_keys"),
           py::arg("episode_id"), py::arg("wait") = py::none(),
           R"doc(Client.insert on this connection: one step, each of `arrays` (C-contiguous
numpy arrays) a one-step chunk keyed by `chunk_keys`, an item per (table, key,
priority) of `items` using them all, the chunks released on the server once
the items hold them. Waits up to `wait` seconds (None: until done) for the
answer; returns (items confirmed, whether the answer ended): unended, the
request stays pending, for insert_step_wait. LocalStatusError with the
server's status if it refused (its chunks may then stay in the connection's
session: close it).)doc")
      .def("insert_step_wait", &InsertStepWait, py::arg("item_keys"), py::arg("confirmed"),
           py::arg("wait") = py::none(),
           "Waits up to `wait` seconds more for the rest of insert_step's answer (`confirmed` items came "
           "already); returns as insert_step.")
      .def("sample_gathered", &SampleGathered, py::arg("request"), py::arg("num_samples"),
           py::arg("timeout") = py::none(),
           R"doc(Sends a serialized SampleRequest (for up to `num_samples`) as SampleInto or
SampleGathered and reads its whole answer: ("gathered", (keys, priorities,
times_sampled, probabilities, table_sizes), stacked columns, squeezed flags)
when the server gathered every column (the columns are views of a batch
region when it went into one), else ("responses", [serialized
SampleResponse, ...]). ValueError if the answer is malformed (the connection
is then shut down).)doc")
      .def("check_open", &LocalClient::CheckOpen,
           "Raises LocalStatusError if the server ended the connection between calls.")
      .def("shutdown", &LocalClient::Shutdown, "Ends the connection, from any thread.");
}

}  // namespace resound::bindings

#include "local_step_insert.h"

#include <pybind11/numpy.h>

#include <bit>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "buffer_view.h"
#include "conversions.h"
#include "local_client_support.h"
#include "resound/errors.h"
#include "resound/local/local_connection.h"
#include "resound/local/replay_local_service.h"
#include "resound/local/step_insert_request.h"
#include "resound/proto_reader.h"
#include "resound/wire_messages.h"

namespace resound::bindings {
namespace {

using local::LocalClient;

// The array's numpy type string, as dtype.str gives it: put together from
// the descriptor's fields for booleans and numbers (dtype.str formats a new
// string each time: a tenth of a 4 KB step's C++ time), asked of numpy for
// the rest (S, U: their sizes count characters).
DType DTypeOf(const py::array& array) {
  const py::dtype dtype = array.dtype();
  const char kind = dtype.kind();
  if (kind != 'b' && kind != 'i' && kind != 'u' && kind != 'f' && kind != 'c') {
    return DType::Parse(dtype.attr("str").cast<std::string>());
  }
  const py::ssize_t size = dtype.itemsize();
  char order = dtype.byteorder();
  if (size == 1 || kind == 'b') {
    order = '|';  // no byte order
  } else if (order == '=') {
    static_assert(std::endian::native == std::endian::little, "native order is written as '<'");
    order = '<';
  }
  return DType::Parse(std::string{order, kind} + std::to_string(size));
}

// Reads the answer's parts, the confirmations of `keys` after the first
// `confirmed`, until its last part or `deadline`: (how many came, whether
// the last part came). A confirmation of anything else, or a last part
// with items unconfirmed, is a malformed answer: ValueError, the
// connection shut down. Without the GIL.
std::pair<size_t, bool> AwaitConfirmations(LocalClient& client, const std::vector<uint64_t>& keys,
                                           size_t confirmed, const Deadline& deadline) {
  while (true) {
    // After an answer with more to come, the next part is asked for.
    if (!client.pending()) client.Start(local::LocalConnection::kContinueMethod, 0);
    const std::optional<LocalClient::Response> response = client.Finish(deadline);
    if (!response) return {confirmed, false};
    ProtoReader reader({reinterpret_cast<const uint8_t*>(response->payload.data()), response->payload.size()},
                       "InsertResponse");
    std::vector<uint64_t> arrived;
    while (reader.Next()) {
      if (reader.field() == wire::insert_response::kItemKeys) reader.AppendVarints(arrived);
    }
    for (const uint64_t key : arrived) {
      if (confirmed == keys.size() || keys[confirmed] != key) {
        client.Shutdown();
        throw InvalidArgumentError("malformed response from the server: it confirmed an item not sent");
      }
      ++confirmed;
    }
    // (Read to the last part even when every item came: the server applies
    // the step's chunk releases before it.)
    if (!response->more) {
      if (confirmed < keys.size()) {
        client.Shutdown();
        throw InvalidArgumentError("malformed response from the server: it ended the insert unconfirmed");
      }
      return {confirmed, true};
    }
  }
}

}  // namespace

std::pair<size_t, bool> InsertStep(LocalClient& client, const py::list& items, const py::list& arrays,
                                   const py::list& chunk_keys, py::handle episode_id, std::optional<double> wait) {
  if (chunk_keys.size() != arrays.size()) throw py::value_error("chunk_keys: one per array");
  std::vector<local::StepInsertRequest::Item> item_list;
  std::vector<uint64_t> item_keys;
  item_list.reserve(items.size());
  for (const py::handle entry : items) {
    if (!py::isinstance<py::tuple>(entry) || py::len(entry) != 3) {
      throw py::value_error("items: (table, key, priority) triples");
    }
    const auto triple = py::reinterpret_borrow<py::tuple>(entry);
    item_list.push_back({triple[0].cast<std::string>(), ToKey(triple[1], "item key"),
                         ToDouble(triple[2], "priority")});
    item_keys.push_back(item_list.back().key);
  }
  // The views keep the arrays' buffers from changing size until written.
  std::vector<std::unique_ptr<BufferView>> views;
  std::vector<local::StepInsertRequest::Field> fields;
  views.reserve(arrays.size());
  fields.reserve(arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (!py::isinstance<py::array>(arrays[i])) throw py::value_error("arrays: numpy arrays only");
    const auto array = py::reinterpret_borrow<py::array>(arrays[i]);
    // The type first: one the core refuses is named (numpy exports no
    // buffer of some, datetime64's, which the view would report instead).
    DType dtype = DTypeOf(array);
    views.push_back(std::make_unique<BufferView>(array));
    std::vector<int64_t> shape(array.shape(), array.shape() + array.ndim());
    fields.push_back({ToKey(chunk_keys[i], "chunk key"), dtype, std::move(shape),
                      {static_cast<const std::byte*>(views.back()->data()), views.back()->size()}});
  }
  const local::StepInsertRequest request(std::move(fields), ToKey(episode_id, "episode_id"), std::move(item_list));
  const Deadline deadline = ToDeadline(wait);
  const auto send = [&] {
    client.EnsureRequestCapacity(request.bytes(), Deadline::Never());
    request.Write({client.request_buffer(), request.bytes()});
    client.Start(local::kInsertStep, request.bytes(), LocalClient::Layout::kDataTail);
  };
  // A step of a few KB is written with the GIL held: handing it over and
  // taking it back would cost more than the copy.
  if (request.bytes() > kKeepGilBelowBytes || request.bytes() > client.request_capacity()) {
    WithoutGil([&] {
      send();
      return 0;
    });
  } else {
    send();
  }
  views.clear();  // written: the arrays' buffers are let go before the wait
  return WithoutGil([&] { return AwaitConfirmations(client, item_keys, 0, deadline); });
}

std::pair<size_t, bool> InsertStepWait(LocalClient& client, const py::list& item_keys, size_t confirmed,
                                       std::optional<double> wait) {
  const std::vector<uint64_t> keys = ToKeys(item_keys, "item_keys");
  if (confirmed > keys.size()) throw py::value_error("confirmed: more than item_keys");
  const Deadline deadline = ToDeadline(wait);
  return WithoutGil([&] { return AwaitConfirmations(client, keys, confirmed, deadline); });
}

}  // namespace resound::bindings

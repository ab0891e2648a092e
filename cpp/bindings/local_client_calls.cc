#include "local_client_calls.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <array>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "buffer_view.h"
#include "conversions.h"
#include "local_client_support.h"
#include "pooled_array.h"
#include "resound/deadline.h"
#include "resound/errors.h"
#include "resound/local/batch_regions.h"
#include "resound/local/gathered_batch.h"
#include "resound/local/packed_mutate_request.h"
#include "resound/local/replay_local_service.h"
#include "resound/proto_reader.h"
#include "resound/wire_messages.h"

namespace resound::bindings {
namespace {

// Sizes from another process checked without overflow: products of two
// 64-bit numbers fit. (__extension__: ISO C++ has no 128-bit integer.)
__extension__ using Wide = unsigned __int128;

using local::LocalClient;

template <typename T>
py::array_t<T> ArrayOf(const std::vector<T>& values) {
  py::array_t<T> out(static_cast<py::ssize_t>(values.size()));
  if (!values.empty()) std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(T));
  return out;
}

bool SameLayout(const ColumnLayout& a, const ColumnLayout& b) {
  return a.dtype == b.dtype && a.step_shape == b.step_shape && a.rows == b.rows && a.squeeze == b.squeeze;
}

// Copies a part's column data to its samples' rows of the stacked outputs.
void CopyPart(const local::GatheredPart& part, const std::vector<std::span<std::byte>>& outputs) {
  size_t at = 0;
  for (size_t c = 0; c < part.columns.size(); ++c) {
    const auto per_sample = static_cast<size_t>(part.columns[c].rows * part.columns[c].RowBytes());
    const size_t bytes = static_cast<size_t>(part.end - part.begin) * per_sample;
    std::memcpy(outputs[c].data() + static_cast<size_t>(part.begin) * per_sample, part.data.data() + at, bytes);
    at += bytes;
  }
}


// The largest batch region a client makes (the server allows four of them
// per connection by default).
constexpr size_t kMaxBatchRegionBytes = size_t{256} << 20;

// The arrays of a batch the server gathered into `lease`'s region: views of
// it, no copy.
py::list ColumnsInRegion(const local::GatheredPart& part, const local::BatchRegions::Lease& lease) {
  local::CheckRegionOffsets(part, lease.region->size());
  py::object base = py::cast(BatchRegionHold{lease.region});
  py::list columns;
  for (size_t c = 0; c < part.columns.size(); ++c) {
    const std::vector<int64_t> shape = part.columns[c].Shape(static_cast<size_t>(part.total));
    columns.append(py::array(py::dtype(std::string(part.columns[c].dtype.str())),
                             std::vector<py::ssize_t>(shape.begin(), shape.end()), std::vector<py::ssize_t>(),
                             lease.region->data() + part.region_offsets[c], base));
  }
  return columns;
}

}  // namespace

py::tuple MutatePriorities(LocalClient& client, const std::string& table, const py::object& updates,
                           const py::object& deletes, std::optional<double> timeout) {
  std::vector<std::pair<uint64_t, double>> update_records;
  if (!updates.is_none()) update_records = ToUpdates(updates);
  std::vector<uint64_t> delete_keys;
  if (!deletes.is_none()) delete_keys = ToKeys(deletes, "deletes key");
  const size_t size = local::PackedMutateRequest::Bytes(table, update_records.size(), delete_keys.size());
  const Deadline deadline = ToDeadline(timeout);
  const auto [updated, deleted] = WithoutGil([&] {
    client.EnsureRequestCapacity(size, deadline);
    local::PackedMutateRequest::Write({client.request_buffer(), size}, table, update_records, delete_keys);
    const LocalClient::Response response = client.Call(local::kMutatePrioritiesPacked, size, deadline);
    namespace f = wire::mutate_priorities_response;
    ProtoReader reader({reinterpret_cast<const uint8_t*>(response.payload.data()), response.payload.size()},
                       "MutatePrioritiesResponse");
    uint64_t num_updated = 0, num_deleted = 0;
    while (reader.Next()) {
      if (reader.field() == f::kNumUpdated) num_updated = reader.varint();
      if (reader.field() == f::kNumDeleted) num_deleted = reader.varint();
    }
    return std::pair{num_updated, num_deleted};
  });
  return py::make_tuple(updated, deleted);
}

py::tuple SampleGathered(LocalClient& client, py::handle request, int64_t num_samples, std::optional<double> timeout) {
  const BufferView view(request);
  constexpr size_t kPrefix = local::BatchRegionRequest::kBytes;
  if (view.size() + kPrefix > client.request_capacity()) {
    throw InvalidArgumentError("sample_gathered: request too large");
  }
  const Deadline deadline = ToDeadline(timeout);
  local::BatchRegions& regions = client.batch_regions();
  // A region for the batch once its size per sample is known (4 KB for the
  // columns' alignment); with none free, the batch comes copied.
  std::optional<local::BatchRegions::Lease> lease;
  if (regions.bytes_per_sample() > 0 && num_samples > 0) {
    const Wide wanted =
        static_cast<Wide>(regions.bytes_per_sample()) * static_cast<uint64_t>(num_samples) + 4096;
    if (wanted <= kMaxBatchRegionBytes) lease = regions.Take(static_cast<size_t>(wanted), kMaxBatchRegionBytes);
  }
  LocalClient::Response response = WithoutGil([&] {
    if (!lease) {
      std::memcpy(client.request_buffer(), view.data(), view.size());
      return client.Call(local::kSampleGathered, view.size(), deadline);
    }
    std::array<std::byte, kPrefix> prefix{};
    const uint64_t region_bytes = lease->region->size();
    std::memcpy(prefix.data(), &lease->slot, sizeof lease->slot);
    std::memcpy(prefix.data() + 8, &region_bytes, sizeof region_bytes);
    std::memcpy(client.request_buffer(), prefix.data(), kPrefix);
    std::memcpy(client.request_buffer() + kPrefix, view.data(), view.size());
    const int fd = lease->region->fd();
    return client.Call(local::kSampleInto, kPrefix + view.size(), deadline,
                       lease->send ? std::span<const int>(&fd, 1) : std::span<const int>());
  });
  const auto bytes_of = [](const LocalClient::Response& r) {
    return py::bytes(reinterpret_cast<const char*>(r.payload.data()), r.payload.size());
  };
  if (!local::IsGatheredPart(response.payload)) {
    if (lease) regions.Used(*lease, false);
    py::list parts;
    parts.append(bytes_of(response));
    while (response.more) {
      response = WithoutGil([&] { return client.Continue(deadline); });
      parts.append(bytes_of(response));
    }
    return py::make_tuple("responses", std::move(parts));
  }
  try {
    local::GatheredPart part = local::ReadGatheredPart(response.payload);
    if (part.begin != 0) throw InvalidArgumentError("gathered batch: the first part does not start the batch");
    regions.set_bytes_per_sample(static_cast<size_t>(local::BytesPerSample(part.columns)));
    const auto infos_of = [](const local::GatheredPart& first) {
      return py::make_tuple(ArrayOf(first.keys), ArrayOf(first.priorities), ArrayOf(first.times_sampled),
                            ArrayOf(first.probabilities), ArrayOf(first.table_sizes));
    };
    const auto squeezed_of = [](const local::GatheredPart& first) {
      py::list squeezed;
      for (const ColumnLayout& layout : first.columns) squeezed.append(layout.squeeze);
      return squeezed;
    };
    if (part.in_region) {
      if (!lease || response.more) throw InvalidArgumentError("gathered batch: in a region that was not lent");
      regions.Used(*lease, true);
      return py::make_tuple("gathered", infos_of(part), ColumnsInRegion(part, *lease), squeezed_of(part));
    }
    if (lease) regions.Used(*lease, false);
    const std::vector<ColumnLayout> layouts = part.columns;
    const int64_t total = part.total;
    py::list columns;
    std::vector<std::span<std::byte>> outputs;
    for (const ColumnLayout& layout : layouts) {
      const std::vector<int64_t> shape = layout.Shape(static_cast<size_t>(total));
      py::array array = PooledArray(py::dtype(std::string(layout.dtype.str())), {shape.begin(), shape.end()});
      outputs.emplace_back(static_cast<std::byte*>(array.mutable_data()), static_cast<size_t>(array.nbytes()));
      columns.append(std::move(array));
    }
    py::list squeezed = squeezed_of(part);
    py::tuple infos = infos_of(part);
    WithoutGil([&] {
      // The arrays are referenced only here until returned.
      CopyPart(part, outputs);
      while (response.more) {
        const int64_t done = part.end;
        response = client.Continue(deadline);
        part = local::ReadGatheredPart(response.payload);
        bool same = part.total == total && part.begin == done && part.columns.size() == layouts.size();
        for (size_t c = 0; same && c < layouts.size(); ++c) same = SameLayout(part.columns[c], layouts[c]);
        if (!same) throw InvalidArgumentError("gathered batch: a part does not continue the batch");
        CopyPart(part, outputs);
      }
      if (part.end != total) throw InvalidArgumentError("gathered batch: the parts end before the batch");
      return 0;
    });
    return py::make_tuple("gathered", std::move(infos), std::move(columns), std::move(squeezed));
  } catch (const InvalidArgumentError&) {
    client.Shutdown();  // parts may be left unread: the connection is not reusable
    throw;
  }
}

}  // namespace resound::bindings

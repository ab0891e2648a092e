#include "resound/local/gathered_batch.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "resound/errors.h"
#include "resound/proto_reader.h"
#include "resound/proto_writer.h"
#include "resound/table.h"

namespace resound::local {
namespace {

// Sizes from another process checked without overflow: products of two
// 64-bit numbers fit. (__extension__: ISO C++ has no 128-bit integer.)
__extension__ using Wide = unsigned __int128;

// Header fields.
constexpr uint32_t kTotal = 1, kBegin = 2, kEnd = 3, kKeys = 4, kPriorities = 5, kTimesSampled = 6,
                   kProbabilities = 7, kTableSizes = 8, kColumn = 9, kInRegion = 10, kRegionOffsets = 11;
// Column fields.
constexpr uint32_t kDtype = 1, kStepShape = 2, kRows = 3, kSqueeze = 4;
constexpr size_t kPrefixBytes = 8;  // magic, header bytes

std::string Header(std::span<const SampledItem> samples, const std::vector<ColumnLayout>& columns, size_t begin,
                   size_t end, const std::vector<uint64_t>* region_offsets = nullptr) {
  ProtoWriter header;
  if (region_offsets != nullptr) {
    header.VarintField(kInRegion, 1);
    header.PackedVarints(kRegionOffsets, *region_offsets);
  }
  header.VarintField(kTotal, samples.size());
  header.VarintField(kBegin, begin);
  header.VarintField(kEnd, end);
  if (begin == 0) {
    std::vector<uint64_t> keys;
    std::vector<double> priorities, probabilities;
    std::vector<int32_t> times_sampled;
    std::vector<int64_t> table_sizes;
    for (const SampledItem& sample : samples) {
      keys.push_back(sample.item->key());
      priorities.push_back(sample.priority);
      times_sampled.push_back(sample.times_sampled);
      probabilities.push_back(sample.probability);
      table_sizes.push_back(sample.table_size);
    }
    header.PackedVarints(kKeys, keys);
    header.PackedDoubles(kPriorities, priorities);
    header.PackedVarints(kTimesSampled, times_sampled);
    header.PackedDoubles(kProbabilities, probabilities);
    header.PackedVarints(kTableSizes, table_sizes);
  }
  for (const ColumnLayout& column : columns) {
    ProtoWriter layout;
    layout.BytesField(kDtype, column.dtype.str());
    layout.PackedVarints(kStepShape, column.step_shape);
    layout.VarintField(kRows, static_cast<uint64_t>(column.rows));
    layout.VarintField(kSqueeze, column.squeeze ? 1 : 0);
    header.MessageField(kColumn, layout);
  }
  return header.data();
}

ColumnLayout ReadColumn(ProtoReader reader) {
  std::optional<DType> dtype;
  std::vector<int64_t> step_shape;
  int64_t rows = 0;
  bool squeeze = false;
  while (reader.Next()) {
    switch (reader.field()) {
      case kDtype:
        dtype = DType::Parse(reader.string());
        break;
      case kStepShape:
        reader.AppendVarints(step_shape);
        break;
      case kRows:
        rows = static_cast<int64_t>(reader.varint());
        break;
      case kSqueeze:
        squeeze = reader.varint() != 0;
        break;
      default:
        break;
    }
  }
  if (!dtype) throw InvalidArgumentError("gathered batch: a column without a dtype");
  ColumnLayout column{*dtype, std::move(step_shape), rows, squeeze};
  // The sizes multiply into allocations: each bounded before they do.
  int64_t elements = 1;
  for (const int64_t dim : column.step_shape) {
    if (dim < 0 || (dim > 0 && elements > std::numeric_limits<int32_t>::max() / dim)) {
      throw InvalidArgumentError("gathered batch: a column's shape is negative or too large");
    }
    elements *= dim;
  }
  if (static_cast<Wide>(elements) * static_cast<Wide>(column.dtype.itemsize()) >
      (uint64_t{1} << 40)) {
    throw InvalidArgumentError("gathered batch: a column's rows are too large");
  }
  if (column.rows < 0 || column.rows > std::numeric_limits<int32_t>::max() || (column.squeeze && column.rows != 1)) {
    throw InvalidArgumentError("gathered batch: a column's rows do not add up");
  }
  return column;
}

}  // namespace

int64_t BytesPerSample(const std::vector<ColumnLayout>& columns) noexcept {
  int64_t bytes = 0;
  for (const ColumnLayout& column : columns) bytes += column.rows * column.RowBytes();
  return bytes;
}

std::pair<size_t, size_t> WriteGatheredPart(std::span<const SampledItem> samples,
                                            const std::vector<ColumnLayout>& columns, size_t begin,
                                            std::span<std::byte> out) {
  const auto per_sample = static_cast<size_t>(BytesPerSample(columns));
  // The header's size with the end at the last sample bounds it for any end.
  const size_t header_bound = Header(samples, columns, begin, samples.size()).size();
  if (out.size() < kPrefixBytes + header_bound) return {begin, 0};
  const size_t room = out.size() - kPrefixBytes - header_bound;
  size_t end = samples.size();
  if (per_sample > 0) end = std::min(end, begin + room / per_sample);
  if (end == begin) return {begin, 0};
  const std::string header = Header(samples, columns, begin, end);
  const uint32_t prefix[2] = {kGatheredMagic, static_cast<uint32_t>(header.size())};
  std::memcpy(out.data(), prefix, kPrefixBytes);
  std::memcpy(out.data() + kPrefixBytes, header.data(), header.size());
  size_t at = kPrefixBytes + header.size();
  const std::span<const SampledItem> part = samples.subspan(begin, end - begin);
  for (size_t c = 0; c < columns.size(); ++c) {
    const size_t bytes = part.size() * static_cast<size_t>(columns[c].rows * columns[c].RowBytes());
    GatherColumn(part, c, columns[c], out.subspan(at, bytes));
    at += bytes;
  }
  return {end, at};
}

std::vector<uint64_t> RegionOffsets(const std::vector<ColumnLayout>& columns, size_t count, size_t* total) {
  constexpr size_t kAlignment = 64;
  std::vector<uint64_t> offsets;
  size_t at = 0;
  for (const ColumnLayout& column : columns) {
    at = (at + kAlignment - 1) / kAlignment * kAlignment;
    offsets.push_back(at);
    at += count * static_cast<size_t>(column.rows * column.RowBytes());
  }
  *total = at;
  return offsets;
}

size_t WriteGatheredToRegion(std::span<const SampledItem> samples, const std::vector<ColumnLayout>& columns,
                             const std::vector<uint64_t>& offsets, std::span<std::byte> region,
                             std::span<std::byte> out) {
  const std::string header = Header(samples, columns, 0, samples.size(), &offsets);
  if (out.size() < kPrefixBytes + header.size()) return 0;
  for (size_t c = 0; c < columns.size(); ++c) {
    const size_t bytes = samples.size() * static_cast<size_t>(columns[c].rows * columns[c].RowBytes());
    GatherColumn(samples, c, columns[c], region.subspan(offsets[c], bytes));
  }
  const uint32_t prefix[2] = {kGatheredMagic, static_cast<uint32_t>(header.size())};
  std::memcpy(out.data(), prefix, kPrefixBytes);
  std::memcpy(out.data() + kPrefixBytes, header.data(), header.size());
  return kPrefixBytes + header.size();
}

bool IsGatheredPart(std::span<const std::byte> message) noexcept {
  uint32_t magic = 0;
  if (message.size() < kPrefixBytes) return false;
  std::memcpy(&magic, message.data(), sizeof magic);
  return magic == kGatheredMagic;
}

GatheredPart ReadGatheredPart(std::span<const std::byte> message) {
  if (!IsGatheredPart(message)) throw InvalidArgumentError("gathered batch: not a gathered part");
  uint32_t header_bytes = 0;
  std::memcpy(&header_bytes, message.data() + 4, sizeof header_bytes);
  if (header_bytes > message.size() - kPrefixBytes) throw InvalidArgumentError("gathered batch: header cut off");
  GatheredPart part;
  ProtoReader reader({reinterpret_cast<const uint8_t*>(message.data()) + kPrefixBytes, header_bytes},
                     "GatheredBatch");
  while (reader.Next()) {
    switch (reader.field()) {
      case kTotal:
        part.total = static_cast<int64_t>(reader.varint());
        break;
      case kBegin:
        part.begin = static_cast<int64_t>(reader.varint());
        break;
      case kEnd:
        part.end = static_cast<int64_t>(reader.varint());
        break;
      case kKeys:
        reader.AppendVarints(part.keys);
        break;
      case kPriorities:
        reader.AppendDoubles(part.priorities);
        break;
      case kTimesSampled:
        reader.AppendVarints(part.times_sampled);
        break;
      case kProbabilities:
        reader.AppendDoubles(part.probabilities);
        break;
      case kTableSizes:
        reader.AppendVarints(part.table_sizes);
        break;
      case kColumn:
        part.columns.push_back(ReadColumn(reader.Nested("column")));
        break;
      case kInRegion:
        part.in_region = reader.varint() != 0;
        break;
      case kRegionOffsets:
        reader.AppendVarints(part.region_offsets);
        break;
      default:
        break;
    }
  }
  if (part.total < 1 || part.total > Table::kMaxSamplesPerCall || part.begin < 0 || part.begin >= part.end ||
      part.end > part.total) {
    throw InvalidArgumentError("gathered batch: a part's samples are out of range");
  }
  const auto total = static_cast<size_t>(part.total);
  if (part.begin == 0) {
    if (part.keys.size() != total || part.priorities.size() != total || part.times_sampled.size() != total ||
        part.probabilities.size() != total || part.table_sizes.size() != total) {
      throw InvalidArgumentError("gathered batch: the infos do not cover the batch");
    }
  }
  part.data = message.subspan(kPrefixBytes + header_bytes);
  if (part.in_region) {
    if (part.begin != 0 || part.end != part.total || !part.data.empty() ||
        part.region_offsets.size() != part.columns.size()) {
      throw InvalidArgumentError("gathered batch: a part in the batch region does not hold the whole batch");
    }
    return part;
  }
  // Per sample at most ~2^31 * 2^31 * itemsize per column: checked in wide
  // arithmetic against the bytes that came.
  Wide expected = 0;
  for (const ColumnLayout& column : part.columns) {
    expected += static_cast<Wide>(column.rows) * static_cast<Wide>(column.RowBytes());
  }
  expected *= static_cast<Wide>(part.end - part.begin);
  if (expected != part.data.size()) {
    throw InvalidArgumentError("gathered batch: the column data does not match the layouts");
  }
  return part;
}

void CheckRegionOffsets(const GatheredPart& part, size_t region_bytes) {
  for (size_t c = 0; c < part.columns.size(); ++c) {
    const Wide end =
        static_cast<Wide>(part.region_offsets[c]) +
        static_cast<Wide>(part.total) * static_cast<Wide>(part.columns[c].rows) *
            static_cast<Wide>(part.columns[c].RowBytes());
    if (end > region_bytes) throw InvalidArgumentError("gathered batch: a column lies outside the batch region");
  }
}

}  // namespace resound::local

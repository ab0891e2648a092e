// A sampled batch as the local transport sends it when every column stacks
// (docs/local-transport.md, "Gathered batches"): the server copies each
// column's rows straight from its chunks into the connection's shared
// memory, in the layout of the stacked arrays the learner gets, and the
// client copies them once into those arrays. A SampleResponse instead carries
// the chunks whole, which the client copies into chunks of its own and then
// gathers: two more copies of every byte, the cost of large samples.
//
// One part of a batch (a batch larger than the region comes in parts, each
// a range of its items) is:
//   u32 kGatheredMagic | u32 header bytes | header | column data
// The header (protocol buffers' wire format, fields below) gives the batch's
// size, the part's item range, the columns' layouts and, in the first part,
// the sample infos of the whole batch; the column data holds, column after
// column, the rows of the part's items. The magic's first byte is the tag of
// a field that a SampleResponse does not have, so the two never mix up.
#ifndef RESOUND_LOCAL_GATHERED_BATCH_H_
#define RESOUND_LOCAL_GATHERED_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "resound/column_gather.h"
#include "resound/table_types.h"

namespace resound::local {

inline constexpr uint32_t kGatheredMagic = 0x42475352;  // "RSGB" little-endian

struct GatheredPart {
  int64_t total = 0;  // samples in the whole batch
  int64_t begin = 0;  // this part's samples: [begin, end)
  int64_t end = 0;
  std::vector<ColumnLayout> columns;
  // The whole batch's infos: in the first part only (empty in the others).
  std::vector<uint64_t> keys;
  std::vector<double> priorities;
  std::vector<int32_t> times_sampled;
  std::vector<double> probabilities;
  std::vector<int64_t> table_sizes;
  std::span<const std::byte> data;  // column after column, into the message read
  // The whole batch in the client's batch region instead (data is empty):
  // each column's bytes at its offset there.
  bool in_region = false;
  std::vector<uint64_t> region_offsets;
};

// Where each column of `count` samples goes in a batch region (each at a
// 64-byte boundary, as pooled arrays are); `*total` gets the bytes needed.
std::vector<uint64_t> RegionOffsets(const std::vector<ColumnLayout>& columns, size_t count, size_t* total);

// Gathers every column of `samples` into `region` at `offsets` (from
// RegionOffsets, whose total must fit) and writes into `out` the part that
// says so; returns its bytes, 0 if it does not fit `out`.
size_t WriteGatheredToRegion(std::span<const SampledItem> samples, const std::vector<ColumnLayout>& columns,
                             const std::vector<uint64_t>& offsets, std::span<std::byte> region,
                             std::span<std::byte> out);

// Bytes of one sample in every column together.
int64_t BytesPerSample(const std::vector<ColumnLayout>& columns) noexcept;

// Writes the part of `samples` from `begin` (with the infos if begin is 0)
// holding as many samples as fit `out`; returns (end, bytes written), or
// (begin, 0) if not even one sample fits. `columns` come from PlanColumn.
std::pair<size_t, size_t> WriteGatheredPart(std::span<const SampledItem> samples,
                                            const std::vector<ColumnLayout>& columns, size_t begin,
                                            std::span<std::byte> out);

// Whether `message` is a gathered part (else a SampleResponse).
bool IsGatheredPart(std::span<const std::byte> message) noexcept;

// Reads a part, checking every size against the bytes that came (for a
// part in the batch region, the caller checks the offsets against it):
// InvalidArgumentError naming what does not add up.
GatheredPart ReadGatheredPart(std::span<const std::byte> message);

// InvalidArgumentError unless every column of an in-region part lies inside
// a region of `region_bytes`.
void CheckRegionOffsets(const GatheredPart& part, size_t region_bytes);

}  // namespace resound::local

#endif  // RESOUND_LOCAL_GATHERED_BATCH_H_

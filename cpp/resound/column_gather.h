// The batched read path: stacking one trajectory column of many samples into
// a single array [batch, rows, *step_shape] (or [batch, *step_shape] for a
// squeezed column) by copying raw chunk rows, so a learner gets one array per
// column instead of decoding every item separately. Planning decides whether
// the fast path applies; when it does not (compressed or delta-encoded chunks,
// ragged lengths, mixed dtypes) the caller decodes item by item instead.
#ifndef RESOUND_COLUMN_GATHER_H_
#define RESOUND_COLUMN_GATHER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "resound/dtype.h"
#include "resound/table_types.h"

namespace resound {

// What one stacked column looks like; the same for every sample of the batch.
struct ColumnLayout {
  DType dtype;
  std::vector<int64_t> step_shape;
  int64_t rows = 0;      // rows per sample (sum of the column's slice lengths)
  bool squeeze = false;  // rows == 1 and the time axis is dropped

  // prod(step_shape) * itemsize: the bytes of one row of one sample.
  int64_t RowBytes() const noexcept;
  // The stacked array's shape for `batch_size` samples.
  std::vector<int64_t> Shape(size_t batch_size) const;
};

// The layout of column `column` stacked over `samples`, or std::nullopt when
// the column cannot be stacked by copying raw rows: a sample lacks the column,
// samples differ in rows or squeeze, a referenced chunk is compressed or delta
// encoded or differs in dtype or step shape, or the stacked size would not
// fit in int64. Throws InvalidArgumentError if `samples` is empty or `column`
// is not a column of the first sample.
std::optional<ColumnLayout> PlanColumn(std::span<const SampledItem> samples, size_t column);

// Copies the rows of column `column` of every sample into `out`, sample after
// sample, one memcpy per slice. `layout` must come from PlanColumn on the same
// samples and column. Throws InvalidArgumentError if `out` is not exactly
// samples.size() * rows * RowBytes() bytes, so a mismatched buffer is never
// overrun.
void GatherColumn(std::span<const SampledItem> samples, size_t column, const ColumnLayout& layout,
                  std::span<std::byte> out);

}  // namespace resound

#endif  // RESOUND_COLUMN_GATHER_H_

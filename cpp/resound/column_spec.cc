#include "resound/column_spec.h"

#include <string_view>
#include <utility>

#include "resound/dtype.h"
#include "resound/errors.h"
#include "resound/shape_text.h"

namespace resound {
namespace {

bool IsStringKind(std::string_view typestr) noexcept {
  return typestr.size() >= 2 && (typestr[1] == 'S' || typestr[1] == 'U');
}

}  // namespace

ColumnSpec::ColumnSpec(std::string typestr, std::optional<std::vector<int64_t>> shape)
    : typestr_(std::move(typestr)), string_kind_(IsStringKind(typestr_)), shape_(std::move(shape)) {
  // Strings match by kind, so their width may be 0 ("any"); everything else
  // must be a valid type string.
  if (!string_kind_) DType::Parse(typestr_);
  if (shape_) {
    for (const int64_t dim : *shape_) {
      if (dim < -1) throw InvalidArgumentError("column spec dimensions must be >= 0 or -1 (any), got " +
                                               ShapeText(*shape_));
    }
  }
}

bool ColumnSpec::MatchesDtype(std::string_view typestr) const noexcept {
  // str is stored as UTF-8 bytes: a 'U' spec accepts 'S' columns and back.
  if (string_kind_) return IsStringKind(typestr);
  return typestr == typestr_;
}

bool ColumnSpec::MatchesShape(std::span<const int64_t> shape) const noexcept {
  if (!shape_) return true;
  if (shape_->size() != shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if ((*shape_)[i] >= 0 && (*shape_)[i] != shape[i]) return false;
  }
  return true;
}

std::string ColumnSpec::ToString() const {
  return typestr_ + " " + (shape_ ? ShapeText(*shape_) : std::string("<any shape>"));
}

void ColumnSpec::Check(const std::vector<ColumnSpec>& specs, const Item& item) {
  const Item::TrajectoryView trajectory = item.trajectory();
  if (trajectory.size() != specs.size()) {
    throw InvalidArgumentError("item " + std::to_string(item.key()) + " has " + std::to_string(trajectory.size()) +
                               " columns but the table signature has " + std::to_string(specs.size()));
  }
  for (size_t c = 0; c < specs.size(); ++c) {
    const ColumnSpec& spec = specs[c];
    // Item::Create checked that the chunks of a column agree, so the first
    // chunk speaks for the column.
    const uint64_t first_key = trajectory[c].slices.front().chunk_key;
    const Chunk* chunk = nullptr;
    for (const auto& candidate : item.chunks()) {
      if (candidate->key() == first_key) chunk = candidate.get();
    }
    if (chunk == nullptr) throw InvalidArgumentError("item's chunk list misses a column's chunk");
    const std::span<const int64_t> step_shape = chunk->step_shape();
    const int64_t rows = item.column_length(c);
    std::vector<int64_t> shape;
    shape.reserve(step_shape.size() + 1);
    if (!trajectory[c].squeeze) shape.push_back(rows);
    for (const int64_t dim : step_shape) shape.push_back(dim);
    const bool shape_ok =
        spec.MatchesShape(shape) || (!trajectory[c].squeeze && rows == 1 && spec.MatchesShape(step_shape));
    if (!spec.MatchesDtype(chunk->dtype().str()) || !shape_ok) {
      throw InvalidArgumentError("item " + std::to_string(item.key()) + ": column " + std::to_string(c) +
                                 " is " + std::string(chunk->dtype().str()) + " " + ShapeText(shape) +
                                 " but the table signature expects " + spec.ToString());
    }
  }
}

}  // namespace resound

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

// numpy's name of a type string ("<f4" -> "float32"), as users write dtypes;
// strings by kind only (a 'U' spec accepts bytes, and widths never matter).
std::string DTypeName(std::string_view typestr) {
  if (typestr.size() < 2) return std::string(typestr);
  const char kind = typestr[1];
  const std::string_view digits = typestr.substr(2);
  if (kind == 'U') return "str";
  if (kind == 'S') return "bytes";
  if (kind == 'b' && digits == "1") return "bool";
  int64_t bytes = 0;
  for (const char digit : digits) {
    if (digit < '0' || digit > '9' || bytes > (int64_t{1} << 40)) return std::string(typestr);
    bytes = bytes * 10 + (digit - '0');
  }
  const std::string bits = std::to_string(bytes * 8);
  switch (kind) {
    case 'i': return "int" + bits;
    case 'u': return "uint" + bits;
    case 'f': return "float" + bits;
    case 'c': return "complex" + bits;
    case 'V': return "void" + bits;
    default: return std::string(typestr);
  }
}

}  // namespace

ColumnSpec::ColumnSpec(std::string typestr, std::optional<std::vector<int64_t>> shape, std::string label)
    : typestr_(std::move(typestr)),
      string_kind_(IsStringKind(typestr_)),
      shape_(std::move(shape)),
      label_(std::move(label)) {
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
  return DTypeName(typestr_) + " " + (shape_ ? ShapeText(*shape_) : std::string("<any shape>"));
}

void ColumnSpec::Check(const std::vector<ColumnSpec>& specs, const Item& item, std::string_view table) {
  const Item::TrajectoryView trajectory = item.trajectory();
  const std::string where = "table '" + std::string(table) + "': ";
  if (trajectory.size() != specs.size()) {
    throw InvalidArgumentError(where + "the item has " + std::to_string(trajectory.size()) +
                               " fields but the signature has " + std::to_string(specs.size()));
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
      const std::string subject = spec.label_.empty() ? "column " + std::to_string(c) : spec.label_;
      std::string message = where + subject + " is " + DTypeName(chunk->dtype().str()) + " " + ShapeText(shape) +
                            " but the signature expects " + spec.ToString();
      // A one-step item (as Client.insert writes every item) has a time axis
      // of length 1 the signature may not have: say so when that axis is
      // what stands between the two.
      if (!trajectory[c].squeeze && rows == 1 && spec.MatchesDtype(chunk->dtype().str())) {
        message += " (a one-step item, as insert() writes, has a time axis of length 1: its value is " +
                   ShapeText(step_shape) + ")";
      }
      throw InvalidArgumentError(message);
    }
  }
}

}  // namespace resound

// What a table's signature asks of each column of an item: an element type
// and a shape. The Python layer flattens the user's signature into one
// ColumnSpec per column, so the core can check every insert itself: a client
// that skips or lies about validation cannot put data of the wrong type or
// shape into a table (Reverb only checked on the client).
#ifndef RESOUND_COLUMN_SPEC_H_
#define RESOUND_COLUMN_SPEC_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "resound/item.h"

namespace resound {

class ColumnSpec {
 public:
  // `typestr` is a numpy type string; for strings ('S', 'U') only the kind
  // counts, so any width (including '|S0') matches. `shape` uses -1 for a
  // dimension of any size; nullopt accepts any shape. Throws
  // InvalidArgumentError for a malformed type string. `label` names the
  // column in errors the way the user knows it (the signature field's path,
  // such as "field ('obs', 'pixels')"); empty: "column <index>".
  ColumnSpec(std::string typestr, std::optional<std::vector<int64_t>> shape, std::string label = {});

  // Throws InvalidArgumentError unless every column of `item` matches its
  // spec: the same number of columns, equal dtypes and compatible shapes.
  // The message names `table`, the column's label and numpy dtype names.
  // A column's shape is [rows, *step_shape], or step_shape when squeezed; a
  // one-row column may also match the step shape alone (a single step
  // written without a time axis, as Reverb's Client.insert allows).
  static void Check(const std::vector<ColumnSpec>& specs, const Item& item, std::string_view table);

  const std::string& typestr() const noexcept { return typestr_; }
  const std::optional<std::vector<int64_t>>& shape() const noexcept { return shape_; }
  const std::string& label() const noexcept { return label_; }
  // The dtype's numpy name and the shape, as in "float32 [?, 4]".
  std::string ToString() const;

 private:
  bool MatchesDtype(std::string_view typestr) const noexcept;
  bool MatchesShape(std::span<const int64_t> shape) const noexcept;

  std::string typestr_;
  bool string_kind_ = false;
  std::optional<std::vector<int64_t>> shape_;
  std::string label_;
};

}  // namespace resound

#endif  // RESOUND_COLUMN_SPEC_H_

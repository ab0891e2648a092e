// Decodes what CheckpointRecordEncoder wrote into one record's payload,
// bounds-checked: a damaged record is a DataLossError naming the file and
// the record, never a read past its end.
#ifndef RESOUND_CHECKPOINT_RECORD_DECODER_H_
#define RESOUND_CHECKPOINT_RECORD_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "resound/errors.h"

namespace resound {

// Reads what CheckpointRecordEncoder wrote; anything out of bounds or left over is a
// DataLossError naming the file and the record.
class CheckpointRecordDecoder {
 public:
  CheckpointRecordDecoder(std::span<const std::byte> data, const std::string& path, uint64_t record)
      : data_(data), path_(path), record_(record) {}

  template <typename T>
  T Get(const char* field) {
    static_assert(std::is_arithmetic_v<T>);
    Need(sizeof(T), field);
    T value;
    std::memcpy(&value, data_.data() + position_, sizeof value);
    position_ += sizeof value;
    return value;
  }
  std::string GetString(const char* field) {
    const auto size = Get<uint64_t>(field);
    Need(size, field);
    std::string text(reinterpret_cast<const char*>(data_.data() + position_), size);
    position_ += size;
    return text;
  }
  std::span<const std::byte> Rest() noexcept {
    auto rest = data_.subspan(position_);
    position_ = data_.size();
    return rest;
  }
  void Finish() const {
    if (position_ != data_.size()) Fail(std::to_string(data_.size() - position_) + " unexpected bytes at its end");
  }
  [[noreturn]] void Fail(const std::string& what) const {
    throw DataLossError("checkpoint " + path_ + " cannot be loaded: record " + std::to_string(record_) + ": " + what);
  }

 private:
  void Need(uint64_t size, const char* field) const {
    if (size > data_.size() - position_) Fail(std::string("it ends inside ") + field);
  }

  std::span<const std::byte> data_;
  const std::string& path_;
  const uint64_t record_;
  size_t position_ = 0;
};

}  // namespace resound

#endif  // RESOUND_CHECKPOINT_RECORD_DECODER_H_

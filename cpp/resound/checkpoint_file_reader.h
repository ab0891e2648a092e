// Reads a checkpoint file written by CheckpointFileWriter (format there and
// in docs/checkpoint-format.md), checking everything: the magic, the version,
// every record's checksum and length, the end record and that nothing
// follows it. A file that fails a check is refused with DataLossError naming
// the file, the record and the byte offset; nothing in it is trusted before
// its checksum matched, so a damaged file can neither crash the reader nor
// make it allocate more than the file's size.
#ifndef RESOUND_CHECKPOINT_FILE_READER_H_
#define RESOUND_CHECKPOINT_FILE_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace resound {

class CheckpointFileReader {
 public:
  // Opens `path` and checks its header. std::system_error if it cannot be
  // read, DataLossError if it is not a checkpoint of a known version.
  explicit CheckpointFileReader(std::string path);
  ~CheckpointFileReader();
  CheckpointFileReader(const CheckpointFileReader&) = delete;
  CheckpointFileReader& operator=(const CheckpointFileReader&) = delete;

  // The next record's type and payload; false (and nothing read) once the
  // end record has been read and checked.
  bool Next(uint32_t& type, std::vector<std::byte>& payload);

  const std::string& path() const noexcept { return path_; }
  uint64_t num_records() const noexcept { return records_; }
  uint64_t file_bytes() const noexcept { return file_bytes_; }

 private:
  void Read(std::byte* out, size_t size, const char* what);
  [[noreturn]] void Fail(const std::string& what) const;

  const std::string path_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0;
  uint64_t offset_ = 0;  // of the next byte Read() returns
  uint64_t records_ = 0;
  bool ended_ = false;
  std::vector<std::byte> buffer_;
  size_t buffer_begin_ = 0;  // unread bytes are buffer_[buffer_begin_, size)
};

}  // namespace resound

#endif  // RESOUND_CHECKPOINT_FILE_READER_H_

// Writes one checkpoint file: a header, then checksummed records, then an end
// record; the file appears under its name only once complete (atomic commit).
//
// The format (docs/checkpoint-format.md):
//   header:  "RSNDCKPT" | u32 version | u32 CRC-32C of the previous 12 bytes
//   record:  u32 type | u64 payload length | payload | u32 CRC-32C of all before it
//   end:     a record of type kEndRecord whose payload is the u64 number of
//            records before it; nothing follows it.
// Integers are little-endian.
//
// Records are written as they come (through a 1 MB buffer, large payload
// parts straight from their memory), so a save never needs a second copy of
// the data in memory. Not thread-safe: one writer per file.
#ifndef RESOUND_CHECKPOINT_FILE_WRITER_H_
#define RESOUND_CHECKPOINT_FILE_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace resound {

class CheckpointFileWriter {
 public:
  static constexpr char kMagic[8] = {'R', 'S', 'N', 'D', 'C', 'K', 'P', 'T'};
  static constexpr uint32_t kVersion = 1;
  static constexpr uint32_t kEndRecord = 0xFFFFFFFF;
  static constexpr size_t kHeaderBytes = 16;
  static constexpr size_t kRecordOverhead = 4 + 8 + 4;

  // Creates the temporary file TemporaryPathOf(path) (failing if it exists:
  // two saves to one name would interleave). std::system_error on I/O errors.
  explicit CheckpointFileWriter(std::string path);
  // `path` + ".<pid>.tmp", the pid this process's: a temporary left by a
  // process killed mid-save is recognisably a save's, and whose (see
  // resound.checkpointers, which removes those of processes gone).
  static std::string TemporaryPathOf(const std::string& path);
  // Without Commit(), the temporary file is removed: nothing appears at `path`.
  ~CheckpointFileWriter();
  CheckpointFileWriter(const CheckpointFileWriter&) = delete;
  CheckpointFileWriter& operator=(const CheckpointFileWriter&) = delete;

  // One record whose payload is `parts` back to back (a chunk's description
  // and its payload go out without being copied together first). `type`
  // must not be kEndRecord.
  void Append(uint32_t type, std::initializer_list<std::span<const std::byte>> parts);

  // Ends the file (end record), writes it out, fsyncs it, renames it to
  // `path` (replacing nothing: an existing `path` is an error) and fsyncs
  // the directory. The writer is done afterwards.
  void Commit();

  const std::string& path() const noexcept { return path_; }
  const std::string& temporary_path() const noexcept { return temporary_path_; }
  uint64_t bytes_written() const noexcept { return bytes_; }
  uint64_t num_records() const noexcept { return records_; }

 private:
  void Write(std::span<const std::byte> data);
  void WriteFully(std::span<const std::byte> data);
  void FlushBuffer();
  void CloseFile() noexcept;

  const std::string path_;
  const std::string temporary_path_;
  int fd_ = -1;
  std::vector<std::byte> buffer_;
  uint64_t bytes_ = 0;
  uint64_t records_ = 0;
  bool committed_ = false;
};

}  // namespace resound

#endif  // RESOUND_CHECKPOINT_FILE_WRITER_H_

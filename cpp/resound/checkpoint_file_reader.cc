#include "resound/checkpoint_file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include "resound/checkpoint_file_writer.h"
#include "resound/crc32c.h"
#include "resound/errors.h"

namespace resound {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

template <typename T>
T GetLittleEndian(const std::byte* in) noexcept {
  static_assert(std::endian::native == std::endian::little, "checkpoint I/O assumes a little-endian host");
  T value;
  std::memcpy(&value, in, sizeof value);
  return value;
}

// What a file that is not a regular one is, for the error.
const char* KindOf(mode_t mode) noexcept {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  return "a file of another kind";
}

}  // namespace

CheckpointFileReader::CheckpointFileReader(std::string path) : path_(std::move(path)) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer (a server
  // hung at start); it is refused below, and regular files ignore the flag.
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "opening " + path_);
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    const int error = errno;
    ::close(std::exchange(fd_, -1));
    throw std::system_error(error, std::generic_category(), "reading " + path_);
  }
  file_bytes_ = static_cast<uint64_t>(info.st_size);
  try {
    // A device or FIFO has no size to check records against (/dev/zero
    // would be read forever).
    if (!S_ISREG(info.st_mode)) {
      Fail(std::string("it is ") + KindOf(info.st_mode) + ", not a regular file; not a resound checkpoint");
    }
    std::byte header[CheckpointFileWriter::kHeaderBytes];
    if (file_bytes_ < sizeof header) Fail("it is shorter than a checkpoint header; not a resound checkpoint");
    Read(header, sizeof header, "the header");
    if (std::memcmp(header, CheckpointFileWriter::kMagic, sizeof CheckpointFileWriter::kMagic) != 0) {
      Fail("it does not start with \"RSNDCKPT\"; not a resound checkpoint");
    }
    if (GetLittleEndian<uint32_t>(header + 12) != Crc32c(0, {header, 12})) Fail("its header checksum does not match");
    const auto version = GetLittleEndian<uint32_t>(header + 8);
    if (version != CheckpointFileWriter::kVersion) {
      Fail("it has format version " + std::to_string(version) + "; this resound reads version " +
           std::to_string(CheckpointFileWriter::kVersion));
    }
  } catch (...) {
    ::close(std::exchange(fd_, -1));
    throw;
  }
}

CheckpointFileReader::~CheckpointFileReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool CheckpointFileReader::Next(uint32_t& type, std::vector<std::byte>& payload) {
  if (ended_) return false;
  const uint64_t record_offset = offset_;
  const std::string record = "record " + std::to_string(records_) + " (offset " + std::to_string(record_offset) + ")";
  std::byte head[12];
  if (file_bytes_ - offset_ < CheckpointFileWriter::kRecordOverhead) {
    Fail("it ends before its end record, at " + record + ": truncated");
  }
  Read(head, sizeof head, "a record header");
  const auto record_type = GetLittleEndian<uint32_t>(head);
  const auto length = GetLittleEndian<uint64_t>(head + 4);
  // Checked before anything is allocated: a damaged length cannot ask for
  // more memory than the file holds.
  if (length > file_bytes_ - offset_ - 4) {
    Fail(record + " claims " + std::to_string(length) + " bytes but only " +
         std::to_string(file_bytes_ - offset_ - 4) + " follow: truncated or corrupted");
  }
  payload.resize(length);
  Read(payload.data(), payload.size(), "a record payload");
  std::byte tail[4];
  Read(tail, sizeof tail, "a record checksum");
  const uint32_t expected = Crc32c(Crc32c(0, head), payload);
  if (GetLittleEndian<uint32_t>(tail) != expected) Fail(record + " has a wrong checksum: corrupted");
  if (record_type == CheckpointFileWriter::kEndRecord) {
    if (length != 8 || GetLittleEndian<uint64_t>(payload.data()) != records_) {
      Fail("its end record (offset " + std::to_string(record_offset) + ") does not match the " +
           std::to_string(records_) + " records before it: corrupted");
    }
    if (offset_ != file_bytes_) {
      Fail(std::to_string(file_bytes_ - offset_) + " bytes follow its end record: corrupted");
    }
    ended_ = true;
    payload.clear();
    return false;
  }
  type = record_type;
  ++records_;
  return true;
}

void CheckpointFileReader::Read(std::byte* out, size_t size, const char* what) {
  while (size > 0) {
    if (buffer_begin_ < buffer_.size()) {
      const size_t take = std::min(size, buffer_.size() - buffer_begin_);
      std::memcpy(out, buffer_.data() + buffer_begin_, take);
      buffer_begin_ += take;
      out += take;
      size -= take;
      offset_ += take;
      continue;
    }
    // Large reads go straight to their destination; small ones refill the buffer.
    const bool direct = size >= kBufferBytes / 2;
    std::byte* target = out;
    size_t want = size;
    if (!direct) {
      buffer_.resize(kBufferBytes);
      buffer_begin_ = 0;
      target = buffer_.data();
      want = kBufferBytes;
    }
    const ssize_t got = ::read(fd_, target, want);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "reading " + path_);
    }
    if (got == 0) {
      buffer_.clear();
      Fail(std::string("it ends inside ") + what + " at offset " + std::to_string(offset_) + ": truncated");
    }
    if (direct) {
      out += got;
      size -= static_cast<size_t>(got);
      offset_ += static_cast<uint64_t>(got);
    } else {
      buffer_.resize(static_cast<size_t>(got));
    }
  }
}

void CheckpointFileReader::Fail(const std::string& what) const {
  throw DataLossError("checkpoint " + path_ + " cannot be loaded: " + what);
}

}  // namespace resound

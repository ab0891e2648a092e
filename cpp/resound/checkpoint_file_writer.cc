#include "resound/checkpoint_file_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include "resound/crc32c.h"
#include "resound/errors.h"

namespace resound {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

template <typename T>
void PutLittleEndian(std::byte* out, T value) noexcept {
  static_assert(std::endian::native == std::endian::little, "checkpoint I/O assumes a little-endian host");
  std::memcpy(out, &value, sizeof value);
}

std::system_error IoError(const std::string& what) {
  return std::system_error(errno, std::generic_category(), what);
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string CheckpointFileWriter::TemporaryPathOf(const std::string& path) {
  return path + "." + std::to_string(::getpid()) + ".tmp";
}

CheckpointFileWriter::CheckpointFileWriter(std::string path)
    : path_(std::move(path)), temporary_path_(TemporaryPathOf(path_)) {
  if (path_.empty()) throw InvalidArgumentError("path: a checkpoint file needs a name");
  fd_ = ::open(temporary_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw IoError("creating " + temporary_path_);
  buffer_.reserve(kBufferBytes);
  std::byte header[kHeaderBytes];
  std::memcpy(header, kMagic, sizeof kMagic);
  PutLittleEndian(header + 8, kVersion);
  PutLittleEndian(header + 12, Crc32c(0, {header, 12}));
  try {
    Write(header);
  } catch (...) {
    CloseFile();
    ::unlink(temporary_path_.c_str());
    throw;
  }
}

CheckpointFileWriter::~CheckpointFileWriter() {
  if (committed_) return;
  CloseFile();
  ::unlink(temporary_path_.c_str());
}

void CheckpointFileWriter::Append(uint32_t type, std::initializer_list<std::span<const std::byte>> parts) {
  if (committed_ || fd_ < 0) throw FailedPreconditionError("checkpoint file " + path_ + " is already committed");
  if (type == kEndRecord) throw InvalidArgumentError("type: the end record is written by Commit()");
  uint64_t length = 0;
  for (const auto& part : parts) length += part.size();
  std::byte head[12];
  PutLittleEndian(head, type);
  PutLittleEndian(head + 4, length);
  uint32_t crc = Crc32c(0, head);
  Write(head);
  for (const auto& part : parts) {
    crc = Crc32c(crc, part);
    Write(part);
  }
  std::byte tail[4];
  PutLittleEndian(tail, crc);
  Write(tail);
  ++records_;
}

void CheckpointFileWriter::Commit() {
  if (committed_ || fd_ < 0) throw FailedPreconditionError("checkpoint file " + path_ + " is already committed");
  std::byte count[8];
  PutLittleEndian(count, records_);
  std::byte head[12];
  PutLittleEndian(head, kEndRecord);
  PutLittleEndian(head + 4, uint64_t{sizeof count});
  std::byte tail[4];
  PutLittleEndian(tail, Crc32c(Crc32c(0, head), count));
  Write(head);
  Write(count);
  Write(tail);
  FlushBuffer();
  if (::fsync(fd_) != 0) throw IoError("syncing " + temporary_path_);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw IoError("closing " + temporary_path_);
  // link() + unlink() rather than rename(): rename would silently replace an
  // existing checkpoint of the same name.
  if (::link(temporary_path_.c_str(), path_.c_str()) != 0) throw IoError("naming " + path_);
  committed_ = true;
  ::unlink(temporary_path_.c_str());
  const std::string directory = DirectoryOf(path_);
  const int dir = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) throw IoError("opening " + directory);
  const int synced = ::fsync(dir);
  ::close(dir);
  if (synced != 0) throw IoError("syncing " + directory);
}

void CheckpointFileWriter::Write(std::span<const std::byte> data) {
  bytes_ += data.size();
  if (buffer_.size() + data.size() <= kBufferBytes) {
    buffer_.insert(buffer_.end(), data.begin(), data.end());
    return;
  }
  FlushBuffer();
  if (data.size() >= kBufferBytes / 2) {
    WriteFully(data);  // large parts go straight from their memory
  } else {
    buffer_.insert(buffer_.end(), data.begin(), data.end());
  }
}

void CheckpointFileWriter::FlushBuffer() {
  WriteFully(buffer_);
  buffer_.clear();
}

void CheckpointFileWriter::WriteFully(std::span<const std::byte> data) {
  while (!data.empty()) {
    const ssize_t written = ::write(fd_, data.data(), data.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      throw IoError("writing " + temporary_path_);
    }
    data = data.subspan(static_cast<size_t>(written));
  }
}

void CheckpointFileWriter::CloseFile() noexcept {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

}  // namespace resound

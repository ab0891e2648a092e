#include "resound/local/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include "resound/errors.h"

namespace resound::local {
namespace {

std::system_error IoError(const std::string& what) { return std::system_error(errno, std::generic_category(), what); }

constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

}  // namespace

SharedMemory SharedMemory::Create(const char* name, size_t size, bool seal_writes) {
  if (size == 0) throw InvalidArgumentError("shared memory: size must be > 0");
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) throw IoError("memfd_create");
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) throw IoError("sizing shared memory");
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) throw IoError("mapping shared memory");
  SharedMemory region(std::move(fd), static_cast<std::byte*>(data), size, true);
  // The seals come after our own writable mapping: F_SEAL_FUTURE_WRITE
  // refuses only mappings made later (the receiver's).
  const int seals = kSizeSeals | (seal_writes ? F_SEAL_FUTURE_WRITE : 0) | F_SEAL_SEAL;
  if (::fcntl(region.fd(), F_ADD_SEALS, seals) != 0) throw IoError("sealing shared memory");
  return region;
}

namespace {

// Checks a received region's seals and size (see Adopt).
void CheckReceived(const UniqueFd& fd, size_t size, bool require_write_seal) {
  if (!fd.valid()) throw InvalidArgumentError("shared memory: no descriptor");
  const int seals = ::fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0) throw InvalidArgumentError("shared memory: the descriptor is not a sealable memfd");
  if ((seals & kSizeSeals) != kSizeSeals) {
    throw InvalidArgumentError("shared memory: the region is not sealed against resizing");
  }
  if (require_write_seal && (seals & F_SEAL_FUTURE_WRITE) == 0) {
    throw InvalidArgumentError("shared memory: the region is not sealed against writes");
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw IoError("shared memory: fstat");
  if (info.st_size < 0 || static_cast<uint64_t>(info.st_size) != size || size == 0) {
    throw InvalidArgumentError("shared memory: the region has " + std::to_string(info.st_size) + " bytes, not " +
                               std::to_string(size));
  }
}

}  // namespace

SharedMemory SharedMemory::Adopt(UniqueFd fd, size_t size, bool require_write_seal) {
  CheckReceived(fd, size, require_write_seal);
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) throw IoError("mapping shared memory");
  return SharedMemory(std::move(fd), static_cast<std::byte*>(data), size, false);
}

SharedMemory SharedMemory::AdoptWritable(UniqueFd fd, size_t size) {
  CheckReceived(fd, size, false);
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) throw InvalidArgumentError("shared memory: the region cannot be mapped for writing");
  return SharedMemory(std::move(fd), static_cast<std::byte*>(data), size, true);
}

SharedMemory::SharedMemory(UniqueFd fd, std::byte* data, size_t size, bool writable) noexcept
    : fd_(std::move(fd)), data_(data), size_(size), writable_(writable) {}

SharedMemory::~SharedMemory() { Unmap(); }

SharedMemory::SharedMemory(SharedMemory&& other) noexcept
    : fd_(std::move(other.fd_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      writable_(std::exchange(other.writable_, false)) {}

SharedMemory& SharedMemory::operator=(SharedMemory&& other) noexcept {
  if (this != &other) {
    Unmap();
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    writable_ = std::exchange(other.writable_, false);
  }
  return *this;
}

void SharedMemory::Unmap() noexcept {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace resound::local

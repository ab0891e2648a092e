// One region of anonymous shared memory (a memfd), mapped into this process:
// how the local transport hands payloads to the other process without
// copying them through the socket. Nothing is named in /dev/shm: the region
// reaches another process only as a descriptor passed over the socket.
//
// The two directions trust differently. A region the server writes for a
// client (sample results) is sealed by the server so that the client can
// map it only for reading and no one can resize it. A region a client writes
// for the server (insert payloads) stays writable by the client, so the
// server copies what it reads out of it before checking it; it refuses the
// region unless it is sealed against shrinking (a shrunk file under a
// mapping would fault the server on its next read).
#ifndef RESOUND_LOCAL_SHARED_MEMORY_H_
#define RESOUND_LOCAL_SHARED_MEMORY_H_

#include <cstddef>
#include <cstdint>

#include "resound/local/unique_fd.h"

namespace resound::local {

class SharedMemory {
 public:
  // A new region of `size` bytes (> 0), mapped for reading and writing, its
  // size sealed (no grow, no shrink). With `seal_writes`, writing is sealed
  // too for every mapping made after this one (F_SEAL_FUTURE_WRITE): the
  // receiver can map it only for reading. std::system_error on failure.
  static SharedMemory Create(const char* name, size_t size, bool seal_writes);

  // Maps a region received as `fd` for reading: InvalidArgumentError unless
  // its size is `size` and it is sealed against shrinking and growing (and,
  // with `require_write_seal`, against writes).
  static SharedMemory Adopt(UniqueFd fd, size_t size, bool require_write_seal);
  // Maps a region received as `fd` for reading and writing (a client's batch
  // region, which the server only writes into): InvalidArgumentError unless
  // its size is `size` and it is sealed against resizing.
  static SharedMemory AdoptWritable(UniqueFd fd, size_t size);

  SharedMemory() noexcept = default;
  ~SharedMemory();
  SharedMemory(SharedMemory&& other) noexcept;
  SharedMemory& operator=(SharedMemory&& other) noexcept;
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  int fd() const noexcept { return fd_.get(); }
  size_t size() const noexcept { return size_; }
  bool writable() const noexcept { return writable_; }
  std::byte* data() noexcept { return data_; }
  const std::byte* data() const noexcept { return data_; }

 private:
  SharedMemory(UniqueFd fd, std::byte* data, size_t size, bool writable) noexcept;
  void Unmap() noexcept;

  UniqueFd fd_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool writable_ = false;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_SHARED_MEMORY_H_

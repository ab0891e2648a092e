// A file descriptor owned by one object: closed when the object goes, moved
// (never copied) to a new owner. The local transport passes descriptors
// between processes (sockets, shared memory); each must be closed exactly
// once whatever path an error takes.
#ifndef RESOUND_LOCAL_UNIQUE_FD_H_
#define RESOUND_LOCAL_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace resound::local {

class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  // Gives the descriptor up without closing it.
  int Release() noexcept { return std::exchange(fd_, -1); }
  void Reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_UNIQUE_FD_H_

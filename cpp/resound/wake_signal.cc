#include "resound/wake_signal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#ifdef __linux__
#include <sys/eventfd.h>
#endif

namespace resound {

namespace {

[[noreturn]] void ThrowErrno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

}  // namespace

WakeSignal::WakeSignal() {
#ifdef __linux__
  read_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (read_fd_ < 0) ThrowErrno("eventfd for a table's wake signal");
  write_fd_ = read_fd_;
#else
  int fds[2];
  if (pipe(fds) != 0) ThrowErrno("pipe for a table's wake signal");
  for (const int fd : fds) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
#endif
}

WakeSignal::~WakeSignal() {
  if (write_fd_ != read_fd_) close(write_fd_);
  close(read_fd_);
}

void WakeSignal::Raise(uint32_t bits) noexcept {
  if (pending_.fetch_or(bits, std::memory_order_acq_rel) != 0) return;  // already readable
#ifdef __linux__
  const uint64_t one = 1;
  // Cannot fail short of a counter overflow, which Take's reads prevent.
  [[maybe_unused]] const ssize_t written = write(write_fd_, &one, sizeof(one));
#else
  const char byte = 1;
  // A full pipe is already readable, which is all a failed write would mean.
  [[maybe_unused]] const ssize_t written = write(write_fd_, &byte, 1);
#endif
}

uint32_t WakeSignal::Take() noexcept {
  // Drain first, then take the bits: a Raise between the two leaves its bit
  // pending and the descriptor readable again, so nothing is lost.
  char buffer[64];
  while (read(read_fd_, buffer, sizeof(buffer)) > 0) {
  }
  return pending_.exchange(0, std::memory_order_acq_rel);
}

}  // namespace resound

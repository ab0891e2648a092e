// A SOCK_SEQPACKET Unix socket of the local transport: message boundaries
// kept (one frame per message), descriptors passed alongside (SCM_RIGHTS),
// and the peer's process credentials known from the kernel (SO_PEERCRED),
// which a process cannot forge.
#ifndef RESOUND_LOCAL_LOCAL_SOCKET_H_
#define RESOUND_LOCAL_LOCAL_SOCKET_H_

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "resound/deadline.h"
#include "resound/local/message_buffer.h"
#include "resound/local/unique_fd.h"

namespace resound::local {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

class LocalSocket {
 public:
  // The most descriptors one message carries.
  static constexpr size_t kMaxFds = 2;

  // A listening socket bound at `path` (which must not exist).
  // std::system_error on failure; InvalidArgumentError for a path longer than
  // a socket address holds.
  static LocalSocket Listen(const std::string& path, int backlog);
  // A connection to the listening socket at `path`.
  static LocalSocket Connect(const std::string& path);

  LocalSocket() noexcept = default;
  explicit LocalSocket(UniqueFd fd) noexcept : fd_(std::move(fd)) {}

  int fd() const noexcept { return fd_.get(); }
  bool valid() const noexcept { return fd_.valid(); }
  void Close() noexcept { fd_.Reset(); }

  // The next connection, or an invalid socket if none is waiting.
  LocalSocket Accept() const;
  PeerCredentials Peer() const;

  // One message of `parts` back to back with `fds`. std::system_error if the
  // peer went away (EPIPE, ECONNRESET) or on another error.
  void Send(std::span<const std::span<const std::byte>> parts, std::span<const int> fds = {}) const;

  enum class Wait { kReadable, kTimedOut, kStopped };
  // Waits until a message (or the peer's hang-up) can be read, `deadline`
  // passes, or `stop_fd` (if >= 0) becomes readable.
  Wait WaitReadable(const Deadline& deadline, int stop_fd = -1) const;
  // Whether a message (or the peer's hang-up) can be read now.
  bool ReadableNow() const noexcept;
  // Whether the peer hung up (closed, shut down, or its process ended),
  // whatever messages are still there to read.
  bool PeerHungUp() const noexcept;

  // Receives one message into `buffer` (sized to what came) and the
  // descriptors it carried into `fds`. Returns false if the peer closed the
  // connection. InvalidArgumentError if the message did not fit `max_bytes`
  // or carried more than kMaxFds descriptors (they are closed).
  bool Receive(MessageBuffer& buffer, size_t max_bytes, std::vector<UniqueFd>& fds) const;

 private:
  UniqueFd fd_;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_LOCAL_SOCKET_H_

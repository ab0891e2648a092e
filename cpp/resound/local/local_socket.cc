#include "resound/local/local_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include "resound/errors.h"

namespace resound::local {
namespace {

std::system_error IoError(const std::string& what) { return std::system_error(errno, std::generic_category(), what); }

sockaddr_un AddressOf(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    throw InvalidArgumentError("local socket path must be 1 to " + std::to_string(sizeof(address.sun_path) - 1) +
                               " bytes, got " + std::to_string(path.size()) + ": " + path);
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

UniqueFd NewSocket() {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw IoError("creating a local socket");
  return fd;
}

}  // namespace

LocalSocket LocalSocket::Listen(const std::string& path, int backlog) {
  const sockaddr_un address = AddressOf(path);
  UniqueFd fd = NewSocket();
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    throw IoError("binding " + path);
  }
  if (::listen(fd.get(), backlog) != 0) throw IoError("listening on " + path);
  return LocalSocket(std::move(fd));
}

LocalSocket LocalSocket::Connect(const std::string& path) {
  const sockaddr_un address = AddressOf(path);
  UniqueFd fd = NewSocket();
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    throw IoError("connecting to " + path);
  }
  return LocalSocket(std::move(fd));
}

LocalSocket LocalSocket::Accept() const {
  UniqueFd fd(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!fd.valid()) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EINTR) return {};
    throw IoError("accepting a local connection");
  }
  // Blocking from here: each connection's thread waits in poll, then reads.
  const int flags = ::fcntl(fd.get(), F_GETFL);
  ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return LocalSocket(std::move(fd));
}

PeerCredentials LocalSocket::Peer() const {
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(fd_.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
    throw IoError("reading the local peer's credentials");
  }
  return {credentials.pid, credentials.uid, credentials.gid};
}

void LocalSocket::Send(std::span<const std::span<const std::byte>> parts, std::span<const int> fds) const {
  if (fds.size() > kMaxFds) throw InvalidArgumentError("local socket: too many descriptors in one message");
  iovec vectors[4];
  if (parts.size() > 4) throw InvalidArgumentError("local socket: at most 4 parts in one message");
  for (size_t i = 0; i < parts.size(); ++i) {
    vectors[i].iov_base = const_cast<std::byte*>(parts[i].data());
    vectors[i].iov_len = parts[i].size();
  }
  msghdr message{};
  message.msg_iov = vectors;
  message.msg_iovlen = parts.size();
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  if (!fds.empty()) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  while (::sendmsg(fd_.get(), &message, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR) throw IoError("sending on a local connection");
  }
}

LocalSocket::Wait LocalSocket::WaitReadable(const Deadline& deadline, int stop_fd) const {
  pollfd watched[2] = {{fd_.get(), POLLIN, 0}, {stop_fd, POLLIN, 0}};
  const nfds_t count = stop_fd >= 0 ? 2 : 1;
  while (true) {
    int timeout_ms = -1;
    if (!deadline.is_infinite()) {
      // has_passed first: "do not wait" is the earliest time point, whose
      // difference with now would overflow.
      // A passed deadline still looks once (poll for 0 ms): a message
      // already there is readable now.
      const double left = deadline.has_passed()
                              ? 0.0
                              : std::chrono::duration<double>(deadline.time_point() - Deadline::Clock::now()).count();
      // Rounded up: a wait never ends before its deadline.
      timeout_ms = left <= 0 ? 0 : left > 86400.0 ? 86400000 : static_cast<int>(left * 1000.0) + 1;
    }
    const int ready = ::poll(watched, count, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw IoError("waiting on a local connection");
    }
    if (count == 2 && (watched[1].revents & POLLIN) != 0) return Wait::kStopped;
    if ((watched[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) return Wait::kReadable;
    if (!deadline.is_infinite() && deadline.has_passed()) return Wait::kTimedOut;
  }
}

bool LocalSocket::ReadableNow() const noexcept {
  pollfd watched{fd_.get(), POLLIN, 0};
  return ::poll(&watched, 1, 0) > 0 && (watched.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

bool LocalSocket::PeerHungUp() const noexcept {
  // A SOCK_SEQPACKET socket reports POLLHUP once its peer is gone or shut
  // it down both ways (POLLRDHUP for a peer that only stopped sending).
  pollfd watched{fd_.get(), POLLRDHUP, 0};
  return ::poll(&watched, 1, 0) > 0 && (watched.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

bool LocalSocket::Receive(MessageBuffer& buffer, size_t max_bytes, std::vector<UniqueFd>& fds) const {
  const std::span<std::byte> room = buffer.Reserve(max_bytes);
  iovec vector{room.data(), room.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  msghdr message{};
  message.msg_iov = &vector;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t received;
  bool reset = false;
  while ((received = ::recvmsg(fd_.get(), &message, MSG_CMSG_CLOEXEC)) < 0) {
    if (errno == EINTR) continue;
    // A peer that closed with messages of ours unread (a wake, say) leaves
    // ECONNRESET, reported once before what it sent last (its farewell):
    // that is still read.
    if (errno == ECONNRESET && !reset) {
      reset = true;
      continue;
    }
    if (errno == ECONNRESET) return false;
    throw IoError("receiving on a local connection");
  }
  fds.clear();
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
      fds.emplace_back(fd);  // owned now: closed on every path below
    }
  }
  if ((message.msg_flags & MSG_CTRUNC) != 0 || fds.size() > kMaxFds) {
    throw InvalidArgumentError("local socket: a message carried more descriptors than allowed");
  }
  if ((message.msg_flags & MSG_TRUNC) != 0) {
    throw InvalidArgumentError("local socket: a message above " + std::to_string(max_bytes) + " bytes");
  }
  if (received == 0) return false;  // SEQPACKET: a zero-length read is the peer's close
  buffer.SetSize(static_cast<size_t>(received));
  return true;
}

}  // namespace resound::local

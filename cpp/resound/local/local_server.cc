#include "resound/local/local_server.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <utility>

#include "resound/errors.h"

namespace resound::local {

LocalServer::LocalServer(LocalServerOptions options, std::shared_ptr<LocalService> service)
    : options_(std::move(options)), service_(std::move(service)) {
  if (!service_) throw InvalidArgumentError("local server: no service");
  stop_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd_.valid()) throw std::system_error(errno, std::generic_category(), "eventfd");
  listener_ = LocalSocket::Listen(options_.path, 128);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

LocalServer::~LocalServer() { Stop(); }

void LocalServer::Stop() noexcept {
  if (stopped_.exchange(true)) return;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(stop_fd_.get(), &one, sizeof one);
  if (acceptor_.joinable()) acceptor_.join();
  std::list<Served> served;
  {
    std::lock_guard<std::mutex> lock(mu_);
    served.swap(served_);
  }
  for (Served& entry : served) {
    if (entry.thread.joinable()) entry.thread.join();
  }
  listener_.Close();
  ::unlink(options_.path.c_str());
}

size_t LocalServer::num_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(std::count_if(served_.begin(), served_.end(), [](const Served& s) { return !s.done; }));
}

bool LocalServer::Allowed(const PeerCredentials& peer) const noexcept {
  if (options_.allowed_uids.empty()) return peer.uid == ::geteuid();
  return std::find(options_.allowed_uids.begin(), options_.allowed_uids.end(), peer.uid) !=
         options_.allowed_uids.end();
}

void LocalServer::ReapLocked() {
  for (auto it = served_.begin(); it != served_.end();) {
    if (it->done) {
      it->thread.join();
      it = served_.erase(it);
    } else {
      ++it;
    }
  }
}

void LocalServer::AcceptLoop() noexcept {
  while (true) {
    LocalSocket::Wait waited;
    try {
      waited = listener_.WaitReadable(Deadline::Never(), stop_fd_.get());
    } catch (const std::exception&) {
      return;
    }
    if (waited == LocalSocket::Wait::kStopped) return;
    LocalSocket socket;
    try {
      socket = listener_.Accept();
    } catch (const std::exception&) {
      continue;  // out of descriptors, say: the next accept may work
    }
    if (!socket.valid()) continue;
    try {
      // Before a byte of it is read: who is at the other end.
      if (!Allowed(socket.Peer())) {
        ++refused_;
        continue;  // closed unanswered
      }
      std::lock_guard<std::mutex> lock(mu_);
      ReapLocked();
      if (served_.size() >= options_.max_connections) {
        ++refused_;
        continue;
      }
      Served& entry = served_.emplace_back();
      try {
        entry.connection = std::make_unique<LocalConnection>(std::move(socket), options_.limits, options_.token);
        entry.thread = std::thread([this, &entry] {
          entry.connection->Run(*service_, stop_fd_.get());
          entry.connection.reset();  // closes the socket and unmaps at once
          entry.done = true;
        });
      } catch (...) {
        served_.pop_back();  // no thread: the connection is dropped
        throw;
      }
    } catch (const std::exception&) {
      ++refused_;  // out of threads or memory: this connection goes unanswered
    }
  }
}

}  // namespace resound::local

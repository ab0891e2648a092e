// Serves a LocalService on a Unix socket to processes of this host: an
// accept thread and one thread per connection, all in C++ (no GIL on the
// path), each connection checked against the allowed user ids by the
// kernel's credentials of its peer before a byte of it is read.
//
// The socket lives in a directory the caller made that only the server's
// user can enter (resound.Server makes one per server, mode 0700): the
// directory, not the socket's own mode, is what keeps other users out; the
// credential check is the second lock.
#ifndef RESOUND_LOCAL_LOCAL_SERVER_H_
#define RESOUND_LOCAL_LOCAL_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "resound/local/local_connection.h"
#include "resound/local/local_service.h"
#include "resound/local/local_socket.h"
#include "resound/local/unique_fd.h"

namespace resound::local {

struct LocalServerOptions {
  std::string path;                // the socket's path
  std::vector<uid_t> allowed_uids;  // empty: only the server's own user
  size_t max_connections = 1024;
  ConnectionLimits limits;
  std::string token;  // sent to every client that connects (see docs/local-transport.md)
};

class LocalServer {
 public:
  // Binds and starts serving; std::system_error if the socket cannot be made.
  LocalServer(LocalServerOptions options, std::shared_ptr<LocalService> service);
  // Stop().
  ~LocalServer();
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  // Stops accepting, ends every connection (a request being served sees
  // LocalReply::abandoned) and joins the threads; removes the socket file.
  // Idempotent.
  void Stop() noexcept;

  const std::string& path() const noexcept { return options_.path; }
  size_t num_connections() const;
  // Connections refused so far: by their user id, or over max_connections.
  uint64_t num_refused() const noexcept { return refused_.load(); }

 private:
  struct Served {
    std::unique_ptr<LocalConnection> connection;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  void AcceptLoop() noexcept;
  bool Allowed(const PeerCredentials& peer) const noexcept;
  void ReapLocked();

  const LocalServerOptions options_;
  const std::shared_ptr<LocalService> service_;
  LocalSocket listener_;
  UniqueFd stop_fd_;  // an eventfd, readable once stopping
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::list<Served> served_;
  std::atomic<uint64_t> refused_{0};
  std::atomic<bool> stopped_{false};
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_LOCAL_SERVER_H_

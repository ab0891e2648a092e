// The server's end of one local connection: the handshake that sets up its
// two shared memory regions, then its requests, one at a time, each handed
// to the service and answered before the next is read.
//
// One request in flight per connection keeps the regions simple: the
// client writes a request's payload at the start of its upload region's
// payload area and the server its response at the start of the download
// region's, each read by the other side before it writes again. A client
// that wants several calls at once opens several connections. Frames come
// and go over the socket or, without a system call, through the regions'
// control pages (Doorbell).
//
// The client is not trusted: a malformed frame, a region that is not sealed
// as required or larger than allowed, or a request before the handshake
// ends the connection (after an error frame saying why); nothing it sent is
// read before it was copied out of its region.
#ifndef RESOUND_LOCAL_LOCAL_CONNECTION_H_
#define RESOUND_LOCAL_LOCAL_CONNECTION_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "resound/local/doorbell.h"
#include "resound/local/frame.h"
#include "resound/local/local_service.h"
#include "resound/local/local_socket.h"
#include "resound/local/shared_memory.h"

namespace resound::local {

struct ConnectionLimits {
  size_t max_region_bytes = size_t{256} << 20;  // each direction (payload bytes)
  double handshake_seconds = 10.0;
  // The connection's thread looks for the next request at least `spin_floor`
  // after an answer before it sleeps, and up to `spin_ceiling` while its
  // client keeps calling that soon (see SpinBudget). Measured here: spinning
  // 100 us took 5-8 us off each client.insert, sample of one and priority
  // update; up to 1 ms, a writer that flushes after every item went from ~77
  // to ~63 us per item (its next request comes after ~150 us of its Python).
  std::chrono::nanoseconds spin_floor = std::chrono::microseconds(100);
  std::chrono::nanoseconds spin_ceiling = std::chrono::microseconds(1000);
  // The largest client payload arena a connection maps (for reading: its
  // pages are the client's memory, this is address space).
  size_t max_arena_bytes = size_t{4} << 30;
};

class LocalConnection {
 public:
  // Method 0: the rest of the previous request (see LocalReply::Send).
  static constexpr uint32_t kContinueMethod = 0;

  LocalConnection(LocalSocket socket, ConnectionLimits limits, std::string token);
  LocalConnection(const LocalConnection&) = delete;
  LocalConnection& operator=(const LocalConnection&) = delete;

  // Serves the connection until the client closes it, `stop_fd` becomes
  // readable or the client breaks the protocol; never throws.
  void Run(LocalService& service, int stop_fd) noexcept;

  // A short description of why the connection ended (for the server's log).
  const std::string& end_reason() const noexcept { return end_reason_; }

 private:
  class Reply;

  bool Handshake(int stop_fd);
  void Serve(LocalService& service, int stop_fd);
  // The u64 size a region or arena frame carries inline (`what` names it in
  // the error: one not so laid out, or without exactly one descriptor).
  uint64_t DescriptorFrameBytes(const Frame& frame, const std::vector<UniqueFd>& fds, const char* what) const;
  // A region frame: the client's larger upload region in place of the old.
  void ReplaceUpload(const Frame& frame, std::vector<UniqueFd>& fds);
  // An arena frame: the client's payload arena (see PayloadArena).
  void MapArena(const Frame& frame, std::vector<UniqueFd>& fds);
  void SendError(uint64_t request_id, uint32_t code, const std::string& message) const;
  // Sends the response of `size` bytes in the download region: rung, or
  // over the socket with the region itself after EnlargeDownload.
  void SendResponse(uint64_t request_id, size_t size, bool last);
  // A larger download region (see LocalReply::Enlarge).
  bool EnlargeDownload(size_t bytes);

  LocalSocket socket_;
  const ConnectionLimits limits_;
  const std::string token_;
  SharedMemory upload_;    // the client's: request payloads
  SharedMemory download_;  // ours: response payloads
  SharedMemory arena_;     // the client's payload arena, if it sent one
  // After EnlargeDownload, until download_ is sent: the region the client
  // still maps, where the bell rings (and says whether this side sleeps)
  // meanwhile; a client that got only an error since reads its flag there.
  SharedMemory previous_download_;
  Doorbell bell_;  // rings in download_ (or previous_download_), listens to upload_
  MessageBuffer message_;
  std::vector<std::byte> request_;  // the current request's payload, copied
  std::function<void(LocalReply&)> rest_;
  std::string end_reason_;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_LOCAL_CONNECTION_H_

// What a LocalServer does with the calls that reach it: the interface
// between the transport (sockets, frames, shared memory: LocalServer) and
// the replay service behind it (ReplayLocalService, or a test's own).
#ifndef RESOUND_LOCAL_LOCAL_SERVICE_H_
#define RESOUND_LOCAL_LOCAL_SERVICE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "resound/local/unique_fd.h"

namespace resound::local {

// The answer to one request, written by the service. A response is written
// into the connection's download region (`Allocate` and `Send`), or an
// error sent instead (`Fail`); exactly one of the two, once per request.
class LocalReply {
 public:
  virtual ~LocalReply() = default;
  // Room for a response of `size` bytes, in shared memory the client reads;
  // nullptr if it holds less than `size` (capacity() says how much).
  virtual std::byte* Allocate(size_t size) = 0;
  virtual size_t capacity() const noexcept = 0;
  // Replaces the region with a larger one of `bytes`, or of the
  // connection's limit (max_region_bytes) if that is less, for one item
  // larger than the region; the client receives it with the next Send.
  // False, and nothing changes, if the region is that large already.
  virtual bool Enlarge(size_t bytes) {
    (void)bytes;
    return false;
  }
  // Sends the `size` bytes written at Allocate's pointer. With `more`, the
  // request is not done: the client asks for the rest (a Continue request),
  // which runs `rest` with a new reply.
  virtual void Send(size_t size, std::function<void(LocalReply&)> rest = {}) = 0;
  // Fails the request with a gRPC status code and a message for the user.
  virtual void Fail(uint32_t code, const std::string& message) = 0;
  // Whether the client hung up or the server is stopping: a service waiting
  // in slices (for a rate limiter) gives up then.
  virtual bool abandoned() const = 0;
  // The descriptor the request carried (a client's batch region), taken
  // once; invalid if it carried none. One not taken is closed.
  virtual UniqueFd TakeAttachment() { return {}; }
  // The request's data tail (Frame::kDataTail; empty without one): bytes
  // still in the client's region, which the client may change at any time.
  // The service copies them out as they are (a chunk's payload), during
  // Handle, and reads nothing else from them: nothing it checked is read
  // from there.
  virtual std::span<const std::byte> data_tail() const noexcept { return {}; }
  // Whether the data tail starts with the table of where its chunks'
  // payloads are (Frame::kArenaRefs), some of them in the client's payload
  // arena(): memory the client may change at any time too, copied out as
  // the data tail is.
  virtual bool arena_refs() const noexcept { return false; }
  virtual std::span<const std::byte> arena() const noexcept { return {}; }
  // The most payload bytes one request may bring (the upload region's
  // limit), which a request naming them in the arena is held to as well.
  virtual size_t max_request_bytes() const noexcept { return 0; }
};

// One connection's state in the service (an insert stream's chunks, say):
// made when the connection is let in, dropped when it ends.
class LocalSession {
 public:
  virtual ~LocalSession() = default;
  // Answers one request of `method` whose payload is `request` (the server's
  // own copy: the client can no longer change it). Exceptions become errors
  // (InvalidArgumentError: INVALID_ARGUMENT, and so on: StatusCodeOf).
  virtual void Handle(uint32_t method, std::span<const std::byte> request, LocalReply& reply) = 0;
};

class LocalService {
 public:
  virtual ~LocalService() = default;
  // A session for a new connection (called on that connection's thread).
  virtual std::unique_ptr<LocalSession> Open() = 0;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_LOCAL_SERVICE_H_

// The client's end of one local connection (see LocalConnection for the
// protocol): the handshake, then calls one at a time, each payload written
// straight into the upload region by the caller and each response read from
// the server's download region, which this side can only map for reading.
//
// Not thread-safe: one call at a time (the Python transport keeps a pool of
// these, one per concurrent call). A call that times out or whose server
// went away leaves the client broken(): it is closed, and a new one is made
// for the next call.
#ifndef RESOUND_LOCAL_LOCAL_CLIENT_H_
#define RESOUND_LOCAL_LOCAL_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "resound/deadline.h"
#include "resound/local/batch_regions.h"
#include "resound/local/doorbell.h"
#include "resound/local/frame.h"
#include "resound/local/local_socket.h"
#include "resound/local/payload_arena.h"
#include "resound/local/shared_memory.h"

namespace resound::local {

class LocalClient {
 public:
  // Connects to the server at `path` and sets up regions of the given sizes
  // (each at most what the server allows). std::system_error if nothing
  // listens there (ENOENT, ECONNREFUSED) or the peer is not let in;
  // StatusError for a refusal the server explains; DeadlineExceededError.
  LocalClient(const std::string& path, size_t upload_bytes, size_t download_bytes, const Deadline& deadline);
  LocalClient(const LocalClient&) = delete;
  LocalClient& operator=(const LocalClient&) = delete;
  ~LocalClient();

  // What the server sent in its welcome (docs/local-transport.md: the proof
  // that this socket reaches the server that advertised it).
  const std::string& token() const noexcept { return token_; }

  // Where the caller writes a request's payload; capacity in bytes.
  std::byte* request_buffer() noexcept { return Doorbell::Payload(upload_); }
  size_t request_capacity() const noexcept { return Doorbell::PayloadBytes(upload_); }
  size_t response_capacity() const noexcept { return Doorbell::PayloadBytes(download_); }

  // How long a call looks for its answer before it sleeps (kDefaultSpin;
  // a test sets 0 to have every answer wake it).
  static constexpr std::chrono::nanoseconds kDefaultSpin = std::chrono::microseconds(50);
  void SetSpin(std::chrono::nanoseconds spin) noexcept { spin_ = spin; }
  // Wake frames this side sent: requests rung while the server slept.
  uint64_t wakes_sent() const noexcept { return bell_.wakes_sent(); }
  // Whether the server's thread for this connection sleeps now (it looks
  // for the next request without sleeping for a while after each answer).
  bool server_sleeps() const noexcept { return bell_.PeerSleeps(); }

  // How a request's payload is laid out: a message, or a message whose
  // chunk payloads follow it apart (Frame::kDataTail, an insert's:
  // wire::WriteWithDataTail).
  // kDataTailArenaRefs: a data tail that starts with the table of where the
  // chunks' payloads are, some in the payload arena (AttachArena).
  enum class Layout { kMessage, kDataTail, kDataTailArenaRefs };

  struct Response {
    std::span<const std::byte> payload;  // in the download region: valid until the next call
    bool more = false;                   // the request is not done: Continue() for the rest
  };
  // Sends a request of `method` whose `size` payload bytes are at
  // request_buffer() and waits for its answer until `deadline`.
  // StatusError with the server's code and message for an error answer;
  // StatusError(kUnavailable) if the server went away, and
  // DeadlineExceededError if the deadline passed (both leave it broken()).
  // `fds`: descriptors the request carries (at most one: a batch region).
  Response Call(uint32_t method, size_t size, const Deadline& deadline, std::span<const int> fds = {},
                Layout layout = Layout::kMessage);
  // The rest of the last request (after a response with `more`).
  Response Continue(const Deadline& deadline);
  // A call in two halves, for a caller that waits in slices (an insert
  // stream's writer, which must not block past its own timeout): Start
  // sends a request of `method` (kContinue for the next part of the last
  // answer) whose `size` payload bytes are at request_buffer(); Finish waits
  // for its answer until `deadline`, and returns std::nullopt if none came
  // by then: unlike Call's, the connection stays usable and the request
  // pending, for a later Finish. Errors as Call's. One request at a time:
  // FailedPreconditionError for a Start while one is pending (or a Finish
  // with none).
  // `next_later`: this client's next request is a batch away (Frame::kNextLater).
  void Start(uint32_t method, size_t size, Layout layout = Layout::kMessage, bool next_later = false);
  std::optional<Response> Finish(const Deadline& deadline);
  bool pending() const noexcept { return pending_request_ != 0; }

  // Replaces the upload region with a larger one if a request of `bytes`
  // does not fit, of `bytes` rounded up to a MiB (the server refuses a
  // region past its max_message_bytes, so one just large enough is asked
  // for); StatusError(kResourceExhausted) if the server allows no region
  // that large (the old one stays).
  void EnsureRequestCapacity(size_t bytes, const Deadline& deadline);

  // Has the server map `arena` (for reading), so that insert messages may
  // name payloads in it (Layout::kDataTailArenaRefs) instead of carrying
  // them. False if the server runs as another user than this process (it
  // would read whatever the arena holds), in a child that inherited the
  // arena, or if the server refuses one that large; errors otherwise as
  // Call's.
  bool AttachArena(PayloadArena& arena, const Deadline& deadline);
  // The arena the server maps, or nullptr.
  const PayloadArena* arena() const noexcept { return arena_; }
  // Keeps `handles` (the chunks whose payloads the next request names in the
  // arena) until the server answered it, so that their memory is not reused
  // while the server may copy from it: an answer, an error frame, or the
  // server closing the connection lets them go. A connection that this side
  // drops first (a deadline, Shutdown, a broken frame, destruction) never
  // does: a deliberate leak of that message's chunks, as it cannot know
  // when the server is done.
  void HoldUntilAnswered(std::vector<std::shared_ptr<const void>> handles);
  // Records how the insert message now in the upload region was written
  // (with arena refs or without), for staged_layout() to send it as.
  void NoteStaged(bool arena_refs) noexcept;
  Layout staged_layout() const noexcept;

  // Throws what ended the connection if the server ended it while no call
  // was waiting (its farewell's status, or UNAVAILABLE); returns otherwise.
  void CheckOpen();

  bool broken() const noexcept { return broken_; }
  // The regions this connection's gathered batches go into (see BatchRegions).
  BatchRegions& batch_regions() noexcept { return batch_regions_; }
  int fd() const noexcept { return socket_.fd(); }
  // Ends the connection from any thread: a call in progress on the owning
  // thread returns (StatusError(kUnavailable)), later calls fail at once.
  void Shutdown() noexcept;

 private:
  Response Exchange(uint32_t method, size_t size, const Deadline& deadline, std::span<const int> fds = {},
                    Layout layout = Layout::kMessage);
  // The status the server's farewell frame carries, if one can be read now,
  // else StatusError(kUnavailable, what) (the connection is broken either way).
  [[noreturn]] void ThrowEnded(const std::string& what);
  // Reads what is readable now, dropping wake frames for answers already
  // taken (see Doorbell): true if nothing else was there; throws the status
  // of a farewell frame; false if the connection ended otherwise (closed,
  // or a frame that is neither).
  bool DropWakes();
  // Sends a frame of `kind` carrying `bytes` (a u64) and the descriptor `fd`
  // (a region, an arena) and reads its answer.
  void SendDescriptor(Frame::Kind kind, uint64_t bytes, int fd, const Deadline& deadline);
  // Sends `frame` (with `fds`) and reads the answer to it.
  Response Send(Frame frame, std::span<const std::byte> inline_payload, std::span<const int> fds,
                const Deadline& deadline);
  // Replaces the upload region with one of `bytes` (EnsureRequestCapacity).
  void GrowRequestRegion(size_t bytes, const Deadline& deadline);
  // InvalidArgumentError if `size` request bytes do not fit the upload region.
  void CheckFits(size_t size) const;
  // The frame of a request whose `size` payload bytes are in the upload region.
  static Frame SharedRequest(uint32_t method, size_t size, Layout layout) noexcept;
  // Sends `frame`; returns its request id. With in_call_ held.
  uint64_t SendFrame(Frame frame, std::span<const std::byte> inline_payload, std::span<const int> fds);
  // Reads the answer to request `id`; std::nullopt if none came before
  // `deadline`, if `keep_waiting` (else the connection is shut down and
  // DeadlineExceededError thrown). With in_call_ held.
  std::optional<Response> Await(uint64_t id, const Deadline& deadline, bool keep_waiting);
  // The answer `answer` (rung, or received with `inline_payload` and `fds`)
  // to request `id`, checked.
  Response Answer(const Frame& answer, std::span<const std::byte> inline_payload, std::vector<UniqueFd>& fds,
                  uint64_t id);
  // Maps the server's larger download region (Frame::kNewRegion) in place
  // of the old one; InvalidArgumentError if it is not sealed as required or
  // larger than kMaxDownloadBytes.
  void AdoptDownload(UniqueFd fd);
  static constexpr uint64_t kMaxDownloadBytes = uint64_t{1} << 30;
  // Takes in_call_ for one call's duration; a second thread is refused.
  class CallGuard;

  LocalSocket socket_;
  SharedMemory upload_;
  SharedMemory download_;
  Doorbell bell_;  // rings in upload_, listens to download_
  PayloadArena* arena_ = nullptr;
  std::vector<std::shared_ptr<const void>> held_;  // see HoldUntilAnswered
  bool staged_arena_refs_ = false;                 // see NoteStaged
  std::atomic<bool> shut_down_{false};             // Shutdown was called (from any thread)
  std::chrono::nanoseconds spin_ = kDefaultSpin;
  std::string token_;
  MessageBuffer message_;
  uint64_t next_request_ = 1;
  // Start's, until Finish read its answer (atomic: CheckOpen and pending()
  // may be called from a thread other than the one in Finish).
  std::atomic<uint64_t> pending_request_{0};
  std::atomic<bool> broken_{false};
  std::atomic<bool> in_call_{false};  // a second caller at once is refused
  BatchRegions batch_regions_;
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_LOCAL_CLIENT_H_

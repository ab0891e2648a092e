#include "resound/local/local_client.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <iterator>
#include <mutex>
#include <system_error>
#include <utility>

#include "resound/errors.h"
#include "resound/local/frame.h"
#include "resound/local/local_connection.h"
#include "resound/local/status_codes.h"

namespace resound::local {
namespace {

// The most token bytes a welcome may carry.
constexpr size_t kMaxTokenBytes = 1024;

// The status an error frame's payload carries: a u32 code (UNKNOWN if the
// payload is shorter), then the message.
StatusError ErrorOf(std::span<const std::byte> payload) {
  uint32_t code = kUnknown;
  if (payload.size() >= sizeof code) std::memcpy(&code, payload.data(), sizeof code);
  const size_t skip = std::min(payload.size(), sizeof code);
  return StatusError(code, std::string(reinterpret_cast<const char*>(payload.data()) + skip, payload.size() - skip));
}

std::span<const std::byte> PayloadOf(const MessageBuffer& message) {
  return {message.data() + Frame::kHeaderBytes, message.size() - Frame::kHeaderBytes};
}

}  // namespace

LocalClient::LocalClient(const std::string& path, size_t upload_bytes, size_t download_bytes,
                         const Deadline& deadline)
    : socket_(LocalSocket::Connect(path)) {
  upload_ = SharedMemory::Create("resound-local-upload", upload_bytes + Doorbell::kControlBytes, false);
  bell_.Attach(upload_);
  Frame hello;
  hello.kind = Frame::kHello;
  hello.length = 16;
  std::array<std::byte, Frame::kHeaderBytes> header{};
  hello.Encode(header);
  std::array<std::byte, 16> sizes{};
  const uint64_t up = upload_bytes;
  const uint64_t down = download_bytes;
  std::memcpy(sizes.data(), &up, 8);
  std::memcpy(sizes.data() + 8, &down, 8);
  const std::span<const std::byte> parts[] = {header, sizes};
  const int fd = upload_.fd();
  // A server that does not let this process in closes the connection
  // unanswered: the hello's send or the welcome's receive then fails.
  const std::string refused = "local connection to " + path + ": the server closed it (not let in?)";
  try {
    socket_.Send(parts, {&fd, 1});
  } catch (const std::system_error&) {
    throw StatusError(kUnavailable, refused);
  }
  if (socket_.WaitReadable(deadline) != LocalSocket::Wait::kReadable) {
    throw DeadlineExceededError("local connection to " + path + ": no welcome before the deadline");
  }
  std::vector<UniqueFd> fds;
  bool received = false;
  try {
    received = socket_.Receive(message_, Frame::kHeaderBytes + Frame::kMaxInlineBytes, fds);
  } catch (const std::system_error&) {
  }
  if (!received) throw StatusError(kUnavailable, refused);
  const Frame welcome = Frame::Decode(message_);
  const std::span<const std::byte> payload = PayloadOf(message_);
  if (welcome.kind == Frame::kError && payload.size() >= sizeof(uint32_t)) throw ErrorOf(payload);
  if (welcome.kind != Frame::kWelcome || welcome.in_shared() || fds.size() != 1 || payload.size() > kMaxTokenBytes) {
    throw InvalidArgumentError("local connection to " + path + ": not a resound server's welcome");
  }
  token_.assign(reinterpret_cast<const char*>(payload.data()), payload.size());
  download_ = SharedMemory::Adopt(std::move(fds.front()), download_bytes + Doorbell::kControlBytes, true);
  bell_.Listen(download_);
}

LocalClient::Response LocalClient::Call(uint32_t method, size_t size, const Deadline& deadline,
                                        std::span<const int> fds, Layout layout) {
  if (method == LocalConnection::kContinueMethod) throw InvalidArgumentError("local call: method 0 is Continue");
  CheckFits(size);
  return Exchange(method, size, deadline, fds, layout);
}

void LocalClient::CheckFits(size_t size) const {
  if (size > request_capacity()) {
    throw InvalidArgumentError("local call: a request of " + std::to_string(size) + " bytes, above the region's " +
                               std::to_string(request_capacity()));
  }
}

LocalClient::Response LocalClient::Continue(const Deadline& deadline) {
  return Exchange(LocalConnection::kContinueMethod, 0, deadline);
}

void LocalClient::CheckOpen() {
  if (broken_) throw StatusError(kUnavailable, "local connection: broken by an earlier call");
  if (pending_request_ != 0) return;  // what is readable is its answer
  if (!DropWakes()) ThrowEnded("local connection: the server closed it");
}

bool LocalClient::DropWakes() {
  std::vector<UniqueFd> fds;
  while (socket_.ReadableNow()) {
    bool received = false;
    try {
      received = socket_.Receive(message_, Frame::kHeaderBytes + Frame::kMaxInlineBytes, fds);
    } catch (const std::exception&) {
    }
    if (!received) return false;
    Frame frame;
    try {
      frame = Frame::Decode(message_);
    } catch (const std::exception&) {
      return false;
    }
    if (frame.kind == Frame::kWake) continue;
    const std::span<const std::byte> payload = PayloadOf(message_);
    if (frame.kind == Frame::kError && payload.size() >= sizeof(uint32_t)) {
      broken_ = true;
      throw ErrorOf(payload);
    }
    return false;
  }
  return true;
}

void LocalClient::ThrowEnded(const std::string& what) {
  broken_ = true;
  DropWakes();  // throws the farewell's status, if one is there
  throw StatusError(kUnavailable, what);
}

void LocalClient::Shutdown() noexcept {
  broken_ = true;
  shut_down_ = true;  // before the shutdown: a reader that sees its end-of-file sees this
  ::shutdown(socket_.fd(), SHUT_RDWR);
}

LocalClient::Response LocalClient::Exchange(uint32_t method, size_t size, const Deadline& deadline,
                                            std::span<const int> fds, Layout layout) {
  return Send(SharedRequest(method, size, layout), {}, fds, deadline);
}

Frame LocalClient::SharedRequest(uint32_t method, size_t size, Layout layout) noexcept {
  Frame request;
  request.kind = Frame::kRequest;
  request.method = method;
  request.flags = Frame::kInShared;
  if (layout != Layout::kMessage) request.flags |= Frame::kDataTail;
  if (layout == Layout::kDataTailArenaRefs) request.flags |= Frame::kArenaRefs;
  request.length = size;
  return request;
}

LocalClient::~LocalClient() {
  if (held_.empty()) return;
  // Dropped before the server answered: it may still be copying these
  // payloads. Kept for the process's life instead (HoldUntilAnswered):
  // never destroyed, not even at exit, when a static's destructor would
  // free them while that server may still read.
  struct Abandoned {
    std::mutex mu;
    std::vector<std::shared_ptr<const void>> chunks;
  };
  static Abandoned* const abandoned = std::make_unique<Abandoned>().release();
  std::lock_guard<std::mutex> lock(abandoned->mu);
  abandoned->chunks.insert(abandoned->chunks.end(), std::make_move_iterator(held_.begin()),
                           std::make_move_iterator(held_.end()));
}

bool LocalClient::AttachArena(PayloadArena& arena, const Deadline& deadline) {
  if (arena_ == &arena) return true;
  if (!arena.MadeHere() || socket_.Peer().uid != ::geteuid()) return false;
  try {
    SendDescriptor(Frame::kArena, arena.size(), arena.fd(), deadline);
  } catch (const StatusError& error) {
    if (error.code() == kResourceExhausted) return false;
    throw;
  }
  arena_ = &arena;
  return true;
}

void LocalClient::HoldUntilAnswered(std::vector<std::shared_ptr<const void>> handles) {
  held_.insert(held_.end(), std::make_move_iterator(handles.begin()), std::make_move_iterator(handles.end()));
}

void LocalClient::NoteStaged(bool arena_refs) noexcept { staged_arena_refs_ = arena_refs; }

LocalClient::Layout LocalClient::staged_layout() const noexcept {
  return staged_arena_refs_ ? Layout::kDataTailArenaRefs : Layout::kDataTail;
}

void LocalClient::GrowRequestRegion(size_t bytes, const Deadline& deadline) {
  SharedMemory larger = SharedMemory::Create("resound-local-upload", bytes + Doorbell::kControlBytes, false);
  // Rung in from now on: the server listens to it before it answers.
  bell_.Attach(larger);
  try {
    SendDescriptor(Frame::kRegion, bytes, larger.fd(), deadline);
  } catch (...) {
    bell_.Attach(upload_);  // refused (or broken): the old region stays
    throw;
  }
  upload_ = std::move(larger);  // (the same mapping: what the bell points at)
}

void LocalClient::EnsureRequestCapacity(size_t bytes, const Deadline& deadline) {
  if (bytes <= request_capacity()) return;
  constexpr size_t kMiB = size_t{1} << 20;
  GrowRequestRegion((bytes + kMiB - 1) / kMiB * kMiB, deadline);
}

void LocalClient::SendDescriptor(Frame::Kind kind, uint64_t bytes, int fd, const Deadline& deadline) {
  Frame frame;
  frame.kind = kind;
  frame.length = sizeof bytes;
  std::array<std::byte, sizeof bytes> size{};
  std::memcpy(size.data(), &bytes, sizeof bytes);
  Send(frame, size, {&fd, 1}, deadline);
}

class LocalClient::CallGuard {
 public:
  explicit CallGuard(std::atomic<bool>& flag) : flag_(flag) {
    if (flag_.exchange(true)) throw FailedPreconditionError("local connection: used by two threads at once");
  }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;
  ~CallGuard() { flag_ = false; }

 private:
  std::atomic<bool>& flag_;
};

LocalClient::Response LocalClient::Send(Frame request, std::span<const std::byte> inline_payload,
                                        std::span<const int> fds, const Deadline& deadline) {
  const CallGuard guard(in_call_);
  if (pending_request_ != 0) throw FailedPreconditionError("local call: a started request is not finished");
  return *Await(SendFrame(request, inline_payload, fds), deadline, false);
}

void LocalClient::Start(uint32_t method, size_t size, Layout layout, bool next_later) {
  const CallGuard guard(in_call_);
  if (pending_request_ != 0) throw FailedPreconditionError("local call: a started request is not finished");
  CheckFits(size);
  Frame request = SharedRequest(method, size, layout);
  if (next_later) request.flags |= Frame::kNextLater;
  pending_request_ = SendFrame(request, {}, {});
}

std::optional<LocalClient::Response> LocalClient::Finish(const Deadline& deadline) {
  const CallGuard guard(in_call_);
  if (pending_request_ == 0) throw FailedPreconditionError("local call: no started request to finish");
  const uint64_t id = pending_request_;
  try {
    std::optional<Response> response = Await(id, deadline, true);
    if (response) pending_request_ = 0;
    return response;
  } catch (...) {
    pending_request_ = 0;  // failed: the connection is broken, nothing is pending
    throw;
  }
}

uint64_t LocalClient::SendFrame(Frame request, std::span<const std::byte> inline_payload,
                                std::span<const int> fds) {
  if (broken_) throw StatusError(kUnavailable, "local connection: broken by an earlier call");
  request.request_id = next_request_++;
  try {
    // A request with nothing beside its header is rung; the socket carries
    // one with an inline payload or descriptors (a region, a batch region).
    if (request.kind == Frame::kRequest && inline_payload.empty() && fds.empty()) {
      if (bell_.Ring(request)) bell_.SendWake(socket_);
      return request.request_id;
    }
    std::array<std::byte, Frame::kHeaderBytes> header{};
    request.Encode(header);
    const std::span<const std::byte> parts[] = {header, inline_payload};
    socket_.Send(std::span<const std::span<const std::byte>>(parts, inline_payload.empty() ? 1 : 2), fds);
  } catch (const std::system_error& error) {
    ThrowEnded(std::string("local connection: the server went away (") + error.what() + ")");
  }
  return request.request_id;
}

void LocalClient::AdoptDownload(UniqueFd fd) {
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0 || static_cast<uint64_t>(status.st_size) <= Doorbell::kControlBytes ||
      static_cast<uint64_t>(status.st_size) > kMaxDownloadBytes + Doorbell::kControlBytes) {
    throw InvalidArgumentError("local call: the server's new region has no size, or one past the client's limit");
  }
  download_ = SharedMemory::Adopt(std::move(fd), static_cast<size_t>(status.st_size), true);
  bell_.Listen(download_);
}

std::optional<LocalClient::Response> LocalClient::Await(uint64_t id, const Deadline& deadline, bool keep_waiting) {
  if (broken_) throw StatusError(kUnavailable, "local connection: broken by an earlier call");
  std::vector<UniqueFd> received_fds;
  while (true) {
    // Most answers come within tens of microseconds: looked for without
    // sleeping first, then waited for.
    Doorbell::Arrival arrival;
    try {
      // An answer looked for without waiting (Finish with a deadline
      // that has passed) is one look: no spin.
      const bool look_only = keep_waiting && deadline.has_passed();
      arrival = bell_.Wait(socket_, look_only ? std::chrono::nanoseconds(0) : spin_, deadline);
    } catch (const InvalidArgumentError&) {
      broken_ = true;  // a rung frame that is no frame
      throw;
    }
    if (arrival.rung) return Answer(*arrival.rung, {}, received_fds, id);
    if (arrival.wait == LocalSocket::Wait::kTimedOut && keep_waiting) return std::nullopt;
    if (arrival.wait != LocalSocket::Wait::kReadable) {
      // The answer may still come: this connection cannot be reused. (Shut
      // down, not closed: another thread may be calling Shutdown on it.)
      Shutdown();
      throw DeadlineExceededError("local call: no answer before the deadline");
    }
    bool received = false;
    try {
      received = socket_.Receive(message_, Frame::kHeaderBytes + Frame::kMaxInlineBytes, received_fds);
    } catch (const std::system_error&) {
    }
    if (!received) {
      broken_ = true;
      // Closed by the server: it reads nothing more. (Not an end of our own
      // making, Shutdown's: the server may still be copying.)
      if (!shut_down_) held_.clear();
      throw StatusError(kUnavailable, "local connection: the server closed it");
    }
    Frame answer;
    try {
      answer = Frame::Decode(message_);
    } catch (const InvalidArgumentError&) {
      broken_ = true;
      throw;
    }
    if (answer.kind == Frame::kWake && received_fds.empty()) continue;  // the answer is rung: taken next
    return Answer(answer, PayloadOf(message_), received_fds, id);
  }
}

LocalClient::Response LocalClient::Answer(const Frame& answer, std::span<const std::byte> inline_payload,
                                          std::vector<UniqueFd>& fds, uint64_t id) {
  try {
    // Request 0: the server ending the connection over a broken frame.
    const bool farewell = answer.kind == Frame::kError && answer.request_id == 0;
    if (farewell) broken_ = true;
    if (answer.request_id != id && !farewell) throw InvalidArgumentError("local call: an answer to another request");
    const bool new_region = answer.kind == Frame::kResponse && answer.new_region();
    if (fds.size() != (new_region ? 1U : 0U)) {
      throw InvalidArgumentError("local call: an answer with a descriptor it should not carry");
    }
    if (new_region) AdoptDownload(std::move(fds.front()));
  } catch (const InvalidArgumentError&) {
    broken_ = true;
    throw;
  }
  if (answer.kind != Frame::kResponse && answer.kind != Frame::kError) {
    broken_ = true;
    throw InvalidArgumentError("local call: expected a response frame");
  }
  // Answered (in full, or its first part): the server read all of the
  // request, its payloads in the arena included.
  held_.clear();
  if (answer.kind == Frame::kError) throw ErrorOf(inline_payload);
  Response response;
  response.more = !answer.last();
  response.payload =
      answer.in_shared() ? Doorbell::PayloadView(download_, answer.offset, answer.length) : inline_payload;
  return response;
}

}  // namespace resound::local

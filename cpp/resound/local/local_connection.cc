#include "resound/local/local_connection.h"

#include <poll.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <exception>
#include <system_error>
#include <utility>

#include "resound/errors.h"
#include "resound/local/frame.h"
#include "resound/local/spin_budget.h"
#include "resound/local/status_codes.h"

namespace resound::local {
namespace {

constexpr size_t kHelloBytes = 16;  // u64 upload bytes, u64 download bytes

// The connection's thread looks for the next request at least this long
// after an answer before it sleeps, and up to the ceiling while its client
// keeps calling that soon (see SpinBudget). Measured here: spinning 100 us
// took 5-8 us off each client.insert, sample of one and priority update;
// up to 1 ms, a writer that flushes after every item went from ~77 to
// ~63 us per item (its next request comes after ~150 us of its Python).
constexpr std::chrono::microseconds kSpinFloor{100};
constexpr std::chrono::microseconds kSpinCeiling{1000};

uint64_t ReadU64(std::span<const std::byte> bytes, size_t at) {
  uint64_t value;
  std::memcpy(&value, bytes.data() + at, sizeof value);
  return value;
}

std::span<const std::byte> AsBytes(const std::string& text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

// Whether `fd` (if >= 0) is readable now: the server's stop signal.
bool Readable(int fd) noexcept {
  if (fd < 0) return false;
  pollfd watched{fd, POLLIN, 0};
  return ::poll(&watched, 1, 0) > 0 && (watched.revents & POLLIN) != 0;
}

}  // namespace

class LocalConnection::Reply final : public LocalReply {
 public:
  Reply(LocalConnection& connection, uint64_t request_id, int stop_fd, UniqueFd attachment,
        std::span<const std::byte> data_tail)
      : connection_(connection),
        request_id_(request_id),
        stop_fd_(stop_fd),
        attachment_(std::move(attachment)),
        data_tail_(data_tail) {}

  UniqueFd TakeAttachment() override { return std::move(attachment_); }
  std::span<const std::byte> data_tail() const noexcept override { return data_tail_; }

  std::byte* Allocate(size_t size) override {
    return size <= connection_.download_.size() ? connection_.download_.data() : nullptr;
  }
  size_t capacity() const noexcept override { return connection_.download_.size(); }
  bool Enlarge(size_t bytes) override { return connection_.EnlargeDownload(bytes); }
  void Send(size_t size, std::function<void(LocalReply&)> rest) override {
    if (answered_) throw FailedPreconditionError("local reply: answered twice");
    if (size > connection_.download_.size()) throw InvalidArgumentError("local reply: larger than the region");
    answered_ = true;
    connection_.rest_ = std::move(rest);
    connection_.SendResponse(request_id_, size, !connection_.rest_);
  }
  void Fail(uint32_t code, const std::string& message) override {
    if (answered_) throw FailedPreconditionError("local reply: answered twice");
    answered_ = true;
    connection_.rest_ = nullptr;
    connection_.SendError(request_id_, code, message);
  }
  bool abandoned() const override {
    if (Readable(stop_fd_)) return true;
    // The client sends nothing while its request runs: anything readable is
    // its hang-up (or a broken client, which ends the connection anyway).
    pollfd watched{connection_.socket_.fd(), POLLIN, 0};
    return ::poll(&watched, 1, 0) > 0 && watched.revents != 0;
  }
  bool answered() const noexcept { return answered_; }

 private:
  LocalConnection& connection_;
  const uint64_t request_id_;
  const int stop_fd_;
  UniqueFd attachment_;
  const std::span<const std::byte> data_tail_;
  bool answered_ = false;
};

LocalConnection::LocalConnection(LocalSocket socket, ConnectionLimits limits, std::string token)
    : socket_(std::move(socket)), limits_(limits), token_(std::move(token)) {}

void LocalConnection::Run(LocalService& service, int stop_fd) noexcept {
  try {
    if (!Handshake(stop_fd)) return;
    Serve(service, stop_fd);
  } catch (const std::exception& error) {
    // A broken client, or its socket gone: tell it why if it still listens.
    end_reason_ = error.what();
    try {
      SendError(0, kInvalidArgument, std::string("local connection closed: ") + error.what());
    } catch (const std::exception&) {
    }
  }
}

bool LocalConnection::Handshake(int stop_fd) {
  const Deadline deadline = Deadline::AfterSeconds(limits_.handshake_seconds);
  const LocalSocket::Wait waited = socket_.WaitReadable(deadline, stop_fd);
  if (waited != LocalSocket::Wait::kReadable) {
    end_reason_ = waited == LocalSocket::Wait::kStopped ? "server stopping" : "no hello within the handshake time";
    return false;
  }
  std::vector<UniqueFd> fds;
  if (!socket_.Receive(message_, Frame::kHeaderBytes + kHelloBytes, fds)) {
    end_reason_ = "closed before its hello";
    return false;
  }
  const Frame hello = Frame::Decode(message_);
  if (hello.kind != Frame::kHello || hello.in_shared() || hello.length != kHelloBytes || fds.size() != 1) {
    throw InvalidArgumentError("the first frame must be a hello with the client's region");
  }
  const std::span<const std::byte> payload(message_.data() + Frame::kHeaderBytes, kHelloBytes);
  const uint64_t upload_bytes = ReadU64(payload, 0);
  const uint64_t download_bytes = ReadU64(payload, 8);
  for (const uint64_t bytes : {upload_bytes, download_bytes}) {
    if (bytes == 0 || bytes > limits_.max_region_bytes) {
      throw InvalidArgumentError("a region of " + std::to_string(bytes) + " bytes; this server allows 1 to " +
                                 std::to_string(limits_.max_region_bytes));
    }
  }
  upload_ = SharedMemory::Adopt(std::move(fds.front()), upload_bytes, false);
  download_ = SharedMemory::Create("resound-local-download", download_bytes, true);

  Frame welcome;
  welcome.kind = Frame::kWelcome;
  welcome.length = token_.size();
  std::array<std::byte, Frame::kHeaderBytes> header{};
  welcome.Encode(header);
  const std::span<const std::byte> parts[] = {header, AsBytes(token_)};
  const int fd = download_.fd();
  socket_.Send(parts, {&fd, 1});
  return true;
}

void LocalConnection::Serve(LocalService& service, int stop_fd) {
  const std::unique_ptr<LocalSession> session = service.Open();
  std::vector<UniqueFd> fds;
  SpinBudget spin(kSpinFloor, kSpinCeiling);
  while (true) {
    const auto answered_at = std::chrono::steady_clock::now();
    const LocalSocket::Wait waited = socket_.SpinUntilReadable(spin.Next())
                                         ? LocalSocket::Wait::kReadable
                                         : socket_.WaitReadable(Deadline::Never(), stop_fd);
    spin.Waited(std::chrono::steady_clock::now() - answered_at);
    if (waited == LocalSocket::Wait::kStopped) {
      end_reason_ = "server stopping";
      // As a gRPC server ends its calls: CANCELLED, which clients do not
      // retry (a stopped server is not coming back by itself).
      try {
        SendError(0, kCancelled, "the server stopped");
      } catch (const std::exception&) {
      }
      return;
    }
    if (!socket_.Receive(message_, Frame::kHeaderBytes + Frame::kMaxInlineBytes, fds)) {
      end_reason_ = "closed by the client";
      return;
    }
    const Frame frame = Frame::Decode(message_);
    if (frame.kind == Frame::kRegion) {
      ReplaceUpload(frame, fds);
      continue;
    }
    if (frame.kind != Frame::kRequest) throw InvalidArgumentError("expected a request frame");
    if ((frame.flags & ~static_cast<uint32_t>(Frame::kInShared | Frame::kDataTail)) != 0) {
      throw InvalidArgumentError("a request frame with flags only responses carry");
    }
    // At most one descriptor, with a new call (its batch region).
    if (fds.size() > 1 || (!fds.empty() && frame.method == kContinueMethod)) {
      throw InvalidArgumentError("a request carried more descriptors than allowed");
    }
    // The payload is copied before anything reads it: the client can write
    // its region at any time, and a checked value must stay what was checked.
    // (A data tail is not: the service only copies it, see LocalReply.)
    std::span<const std::byte> payload =
        frame.in_shared() ? upload_.View(frame.offset, frame.length)
                          : std::span<const std::byte>(message_).subspan(Frame::kHeaderBytes);
    std::span<const std::byte> data_tail;
    if (frame.data_tail()) {
      const auto malformed = [] {
        return InvalidArgumentError("a request's data tail must follow its message size and message");
      };
      if (payload.size() < sizeof(uint64_t) || frame.method == kContinueMethod) throw malformed();
      const uint64_t message_bytes = ReadU64(payload, 0);
      if (message_bytes > payload.size() - sizeof(uint64_t)) throw malformed();
      data_tail = payload.subspan(sizeof(uint64_t) + message_bytes);
      payload = payload.subspan(sizeof(uint64_t), message_bytes);
    }
    request_.assign(payload.begin(), payload.end());
    Reply reply(*this, frame.request_id, stop_fd, fds.empty() ? UniqueFd() : std::move(fds.front()), data_tail);
    try {
      if (frame.method == kContinueMethod) {
        if (!rest_) throw FailedPreconditionError("nothing to continue: the last request is done");
        auto rest = std::move(rest_);
        rest_ = nullptr;
        rest(reply);
      } else {
        rest_ = nullptr;
        session->Handle(frame.method, request_, reply);
      }
      if (!reply.answered()) reply.Fail(kInternal, "the service gave no answer");
    } catch (const std::system_error&) {
      throw;  // the socket: the connection is over
    } catch (const std::exception& error) {
      if (!reply.answered()) reply.Fail(StatusCodeOf(error), error.what());
    }
  }
}

void LocalConnection::ReplaceUpload(const Frame& frame, std::vector<UniqueFd>& fds) {
  if (frame.in_shared() || frame.length != sizeof(uint64_t) || fds.size() != 1) {
    throw InvalidArgumentError("a region frame must carry its size and one descriptor");
  }
  const uint64_t bytes = ReadU64({message_.data() + Frame::kHeaderBytes, sizeof(uint64_t)}, 0);
  if (bytes == 0 || bytes > limits_.max_region_bytes) {
    // Refused, the connection goes on with its region (the request that
    // needed more is refused with it, as gRPC refuses a message too large).
    SendError(frame.request_id, kResourceExhausted,
              "a request region of " + std::to_string(bytes) + " bytes is larger than max (" +
                  std::to_string(bytes) + " vs. " + std::to_string(limits_.max_region_bytes) + ")");
    return;
  }
  upload_ = SharedMemory::Adopt(std::move(fds.front()), bytes, false);
  SendResponse(frame.request_id, 0, true);
}

void LocalConnection::SendError(uint64_t request_id, uint32_t code, const std::string& message) const {
  Frame frame;
  frame.kind = Frame::kError;
  frame.request_id = request_id;
  // Cut to fit one inline frame.
  const std::string text = message.substr(0, Frame::kMaxInlineBytes - sizeof(uint32_t));
  frame.length = sizeof(uint32_t) + text.size();
  std::array<std::byte, Frame::kHeaderBytes> header{};
  frame.Encode(header);
  std::array<std::byte, sizeof(uint32_t)> status{};
  std::memcpy(status.data(), &code, sizeof code);
  const std::span<const std::byte> parts[] = {header, status, AsBytes(text)};
  socket_.Send(parts);
}

void LocalConnection::SendResponse(uint64_t request_id, size_t size, bool last) {
  Frame frame;
  frame.kind = Frame::kResponse;
  frame.request_id = request_id;
  frame.flags = Frame::kInShared | (last ? static_cast<uint32_t>(Frame::kLast) : 0U) |
                (download_replaced_ ? static_cast<uint32_t>(Frame::kNewRegion) : 0U);
  frame.offset = 0;
  frame.length = size;
  std::array<std::byte, Frame::kHeaderBytes> header{};
  frame.Encode(header);
  const std::span<const std::byte> parts[] = {header};
  const int fd = download_.fd();
  socket_.Send(parts, download_replaced_ ? std::span<const int>(&fd, 1) : std::span<const int>());
  download_replaced_ = false;
}

bool LocalConnection::EnlargeDownload(size_t bytes) {
  const size_t size = std::min(bytes, limits_.max_region_bytes);
  if (size <= download_.size()) return false;
  // (The old region's pages go with it; the client maps the new one when
  // the response comes and lets go of its old mapping.)
  download_ = SharedMemory::Create("resound-local-download", size, true);
  download_replaced_ = true;
  return true;
}

}  // namespace resound::local

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
#include "resound/local/fixed_fields.h"
#include "resound/local/frame.h"
#include "resound/local/spin_budget.h"
#include "resound/local/status_codes.h"

namespace resound::local {
namespace {

constexpr size_t kHelloBytes = 16;  // u64 upload bytes, u64 download bytes

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
        std::span<const std::byte> data_tail, bool arena_refs)
      : connection_(connection),
        request_id_(request_id),
        stop_fd_(stop_fd),
        attachment_(std::move(attachment)),
        data_tail_(data_tail),
        arena_refs_(arena_refs) {}

  UniqueFd TakeAttachment() override { return std::move(attachment_); }
  std::span<const std::byte> data_tail() const noexcept override { return data_tail_; }
  bool arena_refs() const noexcept override { return arena_refs_; }
  std::span<const std::byte> arena() const noexcept override {
    return {connection_.arena_.data(), connection_.arena_.size()};
  }
  size_t max_request_bytes() const noexcept override { return connection_.limits_.max_region_bytes; }

  std::byte* Allocate(size_t size) override {
    return size <= capacity() ? Doorbell::Payload(connection_.download_) : nullptr;
  }
  size_t capacity() const noexcept override { return Doorbell::PayloadBytes(connection_.download_); }
  bool Enlarge(size_t bytes) override { return connection_.EnlargeDownload(bytes); }
  void Send(size_t size, std::function<void(LocalReply&)> rest) override {
    if (answered_) throw FailedPreconditionError("local reply: answered twice");
    if (size > capacity()) throw InvalidArgumentError("local reply: larger than the region");
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
    // (Not whether anything is readable: a wake frame for this very request
    // may be there, see Doorbell.)
    return Readable(stop_fd_) || connection_.socket_.PeerHungUp();
  }
  bool answered() const noexcept { return answered_; }

 private:
  LocalConnection& connection_;
  const uint64_t request_id_;
  const int stop_fd_;
  UniqueFd attachment_;
  const std::span<const std::byte> data_tail_;
  const bool arena_refs_;
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
  const uint64_t upload_bytes = GetField<uint64_t>(payload.data(), 0);
  const uint64_t download_bytes = GetField<uint64_t>(payload.data(), 8);
  for (const uint64_t bytes : {upload_bytes, download_bytes}) {
    if (bytes == 0 || bytes > limits_.max_region_bytes) {
      throw InvalidArgumentError("a region of " + std::to_string(bytes) + " bytes; this server allows 1 to " +
                                 std::to_string(limits_.max_region_bytes));
    }
  }
  upload_ = SharedMemory::Adopt(std::move(fds.front()), upload_bytes + Doorbell::kControlBytes, false);
  download_ = SharedMemory::Create("resound-local-download", download_bytes + Doorbell::kControlBytes, true);
  bell_.Attach(download_);
  bell_.Listen(upload_);

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
  SpinBudget spin(limits_.spin_floor, limits_.spin_ceiling);
  auto answered_at = std::chrono::steady_clock::now();
  bool next_later = false;  // the last request said its next comes a batch later: no spin
  while (true) {
    // The next request: rung, or a message on the socket.
    const std::chrono::nanoseconds look = next_later ? std::chrono::nanoseconds(0) : spin.Next();
    const Doorbell::Arrival arrival = bell_.Wait(socket_, look, Deadline::Never(), stop_fd);
    if (arrival.wait == LocalSocket::Wait::kStopped) {
      end_reason_ = "server stopping";
      // As a gRPC server ends its calls: CANCELLED, which clients do not
      // retry (a stopped server is not coming back by itself).
      try {
        SendError(0, kCancelled, "the server stopped");
      } catch (const std::exception&) {
      }
      return;
    }
    Frame frame;
    std::span<const std::byte> inline_payload;
    if (arrival.rung) {
      frame = *arrival.rung;
      fds.clear();
    } else {
      if (!socket_.Receive(message_, Frame::kHeaderBytes + Frame::kMaxInlineBytes, fds)) {
        end_reason_ = "closed by the client";
        return;
      }
      frame = Frame::Decode(message_);
      if (frame.kind == Frame::kWake) continue;  // its frame is rung: the next Wait takes it
      inline_payload = std::span<const std::byte>(message_).subspan(Frame::kHeaderBytes);
    }
    // (A gap the client announced says nothing of how soon it calls again.)
    if (!next_later) spin.Waited(std::chrono::steady_clock::now() - answered_at);
    if (frame.kind == Frame::kRegion || frame.kind == Frame::kArena) {
      if (frame.kind == Frame::kRegion) {
        ReplaceUpload(frame, fds);
      } else {
        MapArena(frame, fds);
      }
      answered_at = std::chrono::steady_clock::now();
      next_later = false;  // its request follows at once
      continue;
    }
    if (frame.kind != Frame::kRequest) throw InvalidArgumentError("expected a request frame");
    if ((frame.flags & ~static_cast<uint32_t>(Frame::kInShared | Frame::kDataTail | Frame::kArenaRefs |
                                              Frame::kNextLater)) != 0) {
      throw InvalidArgumentError("a request frame with flags only responses carry");
    }
    if (frame.arena_refs() && (!frame.data_tail() || arena_.size() == 0)) {
      throw InvalidArgumentError("a request with arena refs needs a data tail and an arena sent before it");
    }
    // At most one descriptor, with a new call (its batch region).
    if (fds.size() > 1 || (!fds.empty() && frame.method == kContinueMethod)) {
      throw InvalidArgumentError("a request carried more descriptors than allowed");
    }
    // The payload is copied before anything reads it: the client can write
    // its region at any time, and a checked value must stay what was checked.
    // (A data tail is not: the service only copies it, see LocalReply.)
    std::span<const std::byte> payload =
        frame.in_shared() ? Doorbell::PayloadView(upload_, frame.offset, frame.length) : inline_payload;
    std::span<const std::byte> data_tail;
    if (frame.data_tail()) {
      const auto malformed = [] {
        return InvalidArgumentError("a request's data tail must follow its message size and message");
      };
      if (payload.size() < sizeof(uint64_t) || frame.method == kContinueMethod) throw malformed();
      const uint64_t message_bytes = GetField<uint64_t>(payload.data(), 0);
      if (message_bytes > payload.size() - sizeof(uint64_t)) throw malformed();
      data_tail = payload.subspan(sizeof(uint64_t) + message_bytes);
      payload = payload.subspan(sizeof(uint64_t), message_bytes);
    }
    request_.assign(payload.begin(), payload.end());
    Reply reply(*this, frame.request_id, stop_fd, fds.empty() ? UniqueFd() : std::move(fds.front()), data_tail,
                frame.arena_refs());
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
    answered_at = std::chrono::steady_clock::now();
    next_later = frame.next_later();
  }
}

uint64_t LocalConnection::DescriptorFrameBytes(const Frame& frame, const std::vector<UniqueFd>& fds,
                                               const char* what) const {
  if (frame.in_shared() || frame.length != sizeof(uint64_t) || fds.size() != 1) {
    throw InvalidArgumentError(std::string(what) + " must carry its size and one descriptor");
  }
  return GetField<uint64_t>(message_.data(), Frame::kHeaderBytes);
}

void LocalConnection::ReplaceUpload(const Frame& frame, std::vector<UniqueFd>& fds) {
  const uint64_t bytes = DescriptorFrameBytes(frame, fds, "a region frame");
  if (bytes == 0) throw InvalidArgumentError("a region frame of 0 bytes");
  if (bytes > limits_.max_region_bytes) {
    // Refused, the connection goes on with its region (the request that
    // needed more is refused with it, as gRPC refuses a message too large,
    // in the words of gRPC's refusal).
    SendError(frame.request_id, kResourceExhausted,
              "a request region is larger than max (" + std::to_string(bytes) + " vs. " +
                  std::to_string(limits_.max_region_bytes) + ")");
    return;
  }
  upload_ = SharedMemory::Adopt(std::move(fds.front()), bytes + Doorbell::kControlBytes, false);
  bell_.Listen(upload_);
  SendResponse(frame.request_id, 0, true);
}

void LocalConnection::MapArena(const Frame& frame, std::vector<UniqueFd>& fds) {
  const uint64_t bytes = DescriptorFrameBytes(frame, fds, "an arena frame");
  if (bytes == 0) throw InvalidArgumentError("an arena frame of 0 bytes");
  if (bytes > limits_.max_arena_bytes) {
    // Refused: the client copies its payloads into its requests instead.
    SendError(frame.request_id, kResourceExhausted,
              "a payload arena of " + std::to_string(bytes) + " bytes is larger than max (" +
                  std::to_string(limits_.max_arena_bytes) + ")");
    return;
  }
  // Checked (a memfd sealed against resizing, of this size) and mapped for
  // reading; a later arena takes its place.
  arena_ = SharedMemory::Adopt(std::move(fds.front()), bytes, false);
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
  const bool new_region = previous_download_.size() != 0;
  Frame frame;
  frame.kind = Frame::kResponse;
  frame.request_id = request_id;
  frame.flags = Frame::kInShared | (last ? static_cast<uint32_t>(Frame::kLast) : 0U) |
                (new_region ? static_cast<uint32_t>(Frame::kNewRegion) : 0U);
  frame.offset = 0;
  frame.length = size;
  if (!new_region) {
    if (bell_.Ring(frame)) bell_.SendWake(socket_);
    return;
  }
  // Rung in from now on: its count is stamped before the client sees it.
  bell_.Attach(download_);
  previous_download_ = SharedMemory();
  std::array<std::byte, Frame::kHeaderBytes> header{};
  frame.Encode(header);
  const std::span<const std::byte> parts[] = {header};
  const int fd = download_.fd();
  socket_.Send(parts, std::span<const int>(&fd, 1));
}

bool LocalConnection::EnlargeDownload(size_t bytes) {
  const size_t size = std::min(bytes, limits_.max_region_bytes);
  if (size <= Doorbell::PayloadBytes(download_)) return false;
  // The client maps the new one when the response comes and lets go of its
  // old mapping. (An earlier replacement not sent yet just goes.)
  SharedMemory larger = SharedMemory::Create("resound-local-download", size + Doorbell::kControlBytes, true);
  if (previous_download_.size() == 0) previous_download_ = std::move(download_);
  download_ = std::move(larger);
  return true;
}

}  // namespace resound::local

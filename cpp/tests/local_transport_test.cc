// The local transport's plumbing, with a test service: handshake and
// calls, errors and continuations, and the refusals that keep a client from
// harming the server (another user, regions not sealed or too large,
// malformed frames), each leaving the server serving the next client.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "check.h"
#include "resound/errors.h"
#include "resound/local/doorbell.h"
#include "resound/local/frame.h"
#include "resound/local/local_client.h"
#include "resound/local/local_connection.h"
#include "resound/local/local_server.h"
#include "resound/local/shared_memory.h"
#include "resound/local/spin_budget.h"
#include "resound/local/status_codes.h"

namespace resound::local {
namespace {

constexpr uint32_t kEcho = 1;     // answers the request's bytes
constexpr uint32_t kFail = 2;     // fails with NOT_FOUND
constexpr uint32_t kHalves = 3;   // answers in two parts (a continuation)
constexpr uint32_t kWait = 4;     // waits until abandoned
constexpr uint32_t kSilent = 5;   // gives no answer
constexpr uint32_t kLater = 6;    // echoes once the test releases it
constexpr uint32_t kGrowThenFail = 7;  // enlarges the download region, then fails

class TestService final : public LocalService, public LocalSession {
 public:
  std::atomic<int> waiting{0};
  std::atomic<int> abandoned{0};
  std::atomic<bool> released{false};  // kLater's answers go
  std::atomic<int> looks{0};          // kLater's looks at abandoned()

  // One session for all: the test's methods keep no state per connection.
  std::unique_ptr<LocalSession> Open() override { return std::make_unique<Forward>(*this); }

  class Forward final : public LocalSession {
   public:
    explicit Forward(TestService& service) : service_(service) {}
    void Handle(uint32_t method, std::span<const std::byte> request, LocalReply& reply) override {
      service_.Handle(method, request, reply);
    }

   private:
    TestService& service_;
  };

  void Handle(uint32_t method, std::span<const std::byte> request, LocalReply& reply) override {
    switch (method) {
      case kEcho: {
        std::byte* out = reply.Allocate(request.size());
        RESOUND_CHECK(out != nullptr);
        std::memcpy(out, request.data(), request.size());
        reply.Send(request.size());
        return;
      }
      case kFail:
        throw NotFoundError("no such thing: " + std::string(reinterpret_cast<const char*>(request.data()), request.size()));
      case kHalves: {
        const std::vector<std::byte> copy(request.begin(), request.end());
        const size_t half = copy.size() / 2;
        std::memcpy(reply.Allocate(half), copy.data(), half);
        reply.Send(half, [copy, half](LocalReply& rest) {
          std::memcpy(rest.Allocate(copy.size() - half), copy.data() + half, copy.size() - half);
          rest.Send(copy.size() - half);
        });
        return;
      }
      case kLater: {
        const std::vector<std::byte> copy(request.begin(), request.end());
        while (!released && !reply.abandoned()) {
          ++looks;
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (!released) ++abandoned;
        std::memcpy(reply.Allocate(copy.size()), copy.data(), copy.size());
        reply.Send(copy.size());
        return;
      }
      case kGrowThenFail:
        RESOUND_CHECK(reply.Enlarge(2 * reply.capacity()));
        throw StatusError(kResourceExhausted, "too large after all");
      case kWait:
        ++waiting;
        while (!reply.abandoned()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ++abandoned;
        return;
      default:
        return;
    }
  }
};

std::string TempDir() {
  std::string pattern = "/tmp/resound-local-test-XXXXXX";
  RESOUND_CHECK(::mkdtemp(pattern.data()) != nullptr);
  return pattern;
}

Deadline Soon() { return Deadline::AfterSeconds(10); }

std::string Text(std::span<const std::byte> bytes) { return {reinterpret_cast<const char*>(bytes.data()), bytes.size()}; }

size_t Put(LocalClient& client, const std::string& text) {
  std::memcpy(client.request_buffer(), text.data(), text.size());
  return text.size();
}

template <typename Condition>
void WaitFor(Condition condition) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!condition()) {
    RESOUND_CHECK(std::chrono::steady_clock::now() < give_up);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void CallsErrorsAndContinuations(const std::string& dir) {
  auto service = std::make_shared<TestService>();
  LocalServer server({dir + "/a.sock", {}, 8, {}, "the-token"}, service);
  LocalClient client(server.path(), 1 << 16, 1 << 16, Soon());
  RESOUND_CHECK(client.token() == "the-token");
  RESOUND_CHECK(Text(client.Call(kEcho, Put(client, "hello"), Soon()).payload) == "hello");
  // An error answer leaves the connection usable.
  try {
    client.Call(kFail, Put(client, "x"), Soon());
    RESOUND_CHECK(false);
  } catch (const StatusError& error) {
    RESOUND_CHECK(error.code() == kNotFound && std::string(error.what()) == "no such thing: x");
  }
  RESOUND_CHECK(!client.broken());
  const auto first = client.Call(kHalves, Put(client, "abcdef"), Soon());
  RESOUND_CHECK(first.more && Text(first.payload) == "abc");
  const auto second = client.Continue(Soon());
  RESOUND_CHECK(!second.more && Text(second.payload) == "def");
  RESOUND_CHECK(Throws<StatusError>([&] { client.Continue(Soon()); }));  // nothing left
  RESOUND_CHECK(Throws<StatusError>([&] { client.Call(kSilent, 0, Soon()); }));
  // A payload as large as the region.
  const std::string big(1 << 16, 'z');
  RESOUND_CHECK(Text(client.Call(kEcho, Put(client, big), Soon()).payload) == big);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { client.Call(kEcho, (1 << 16) + 1, Soon()); }));
  // A call that times out breaks its connection; the server lets it go.
  RESOUND_CHECK(Throws<DeadlineExceededError>([&] { client.Call(kWait, 0, Deadline::AfterSeconds(0.05)); }));
  RESOUND_CHECK(client.broken());
  WaitFor([&] { return service->abandoned == 1 && server.num_connections() == 0; });
  // Several clients at once, each its own thread on the server.
  std::vector<std::unique_ptr<LocalClient>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(std::make_unique<LocalClient>(server.path(), 4096, 4096, Soon()));
  for (int i = 0; i < 4; ++i) {
    const std::string text = "client " + std::to_string(i);
    RESOUND_CHECK(Text(clients[i]->Call(kEcho, Put(*clients[i], text), Soon()).payload) == text);
  }
  RESOUND_CHECK(server.num_connections() == 4);
}

// Start and Finish: a caller that waits in slices keeps its connection
// (and its request) across a Finish that timed out.
void CallsInTwoHalves(const std::string& dir) {
  auto service = std::make_shared<TestService>();
  LocalServer server({dir + "/halves.sock", {}, 8, {}, "the-token"}, service);
  LocalClient client(server.path(), 1 << 16, 1 << 16, Soon());
  RESOUND_CHECK(Throws<FailedPreconditionError>([&] { client.Finish(Soon()); }));  // nothing started
  client.Start(kLater, Put(client, "later"));
  RESOUND_CHECK(client.pending());
  RESOUND_CHECK(!client.Finish(Deadline::AfterSeconds(0.02)).has_value());
  RESOUND_CHECK(!client.broken() && client.pending());
  // One request at a time, whichever way it is sent.
  RESOUND_CHECK(Throws<FailedPreconditionError>([&] { client.Start(kEcho, 0); }));
  RESOUND_CHECK(Throws<FailedPreconditionError>([&] { client.Call(kEcho, 0, Soon()); }));
  client.CheckOpen();  // the answer to come is not taken for the server closing
  // A Finish whose deadline has passed looks once (a writer between items).
  RESOUND_CHECK(!client.Finish(Deadline::AfterSeconds(0)).has_value());
  RESOUND_CHECK(!client.broken() && client.pending());
  service->released = true;
  std::optional<LocalClient::Response> answer;
  const Deadline give_up = Soon();
  while (!answer && !give_up.has_passed()) answer = client.Finish(Deadline::AfterSeconds(0));
  RESOUND_CHECK(answer.has_value() && !answer->more && Text(answer->payload) == "later");
  RESOUND_CHECK(!client.pending());
  // An answer in parts: Start(kContinue) asks for the next one.
  client.Start(kHalves, Put(client, "abcdef"));
  const auto first = client.Finish(Soon());
  RESOUND_CHECK(first.has_value() && first->more && Text(first->payload) == "abc");
  client.Start(LocalConnection::kContinueMethod, 0);
  const auto second = client.Finish(Soon());
  RESOUND_CHECK(second.has_value() && !second->more && Text(second->payload) == "def");
  // A request larger than the region is refused before anything is sent.
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { client.Start(kEcho, (1 << 16) + 1); }));
  RESOUND_CHECK(!client.pending());
  // A failed answer ends the pending request, the connection stays usable.
  client.Start(kFail, Put(client, "y"));
  RESOUND_CHECK(Throws<StatusError>([&] { client.Finish(Soon()); }));
  RESOUND_CHECK(!client.pending() && !client.broken());
  RESOUND_CHECK(Text(client.Call(kEcho, Put(client, "still"), Soon()).payload) == "still");
}

// A request that says its client's next one comes later (Frame::kNextLater):
// the server's thread sleeps after answering it instead of spinning, even
// with a spin floor of a minute, and the next request wakes it.
void NextLaterRequestsLetTheServerSleep(const std::string& dir) {
  auto service = std::make_shared<TestService>();
  ConnectionLimits limits;
  limits.spin_floor = limits.spin_ceiling = std::chrono::seconds(60);
  LocalServer server({dir + "/later.sock", {}, 8, limits, "t"}, service);
  LocalClient client(server.path(), 1 << 16, 1 << 16, Soon());
  RESOUND_CHECK(Text(client.Call(kEcho, Put(client, "soon"), Soon()).payload) == "soon");
  RESOUND_CHECK(!client.server_sleeps());  // spinning for the next request
  client.Start(kEcho, Put(client, "later"), LocalClient::Layout::kMessage, /*next_later=*/true);
  const auto answer = client.Finish(Soon());
  RESOUND_CHECK(answer.has_value() && Text(answer->payload) == "later");
  WaitFor([&] { return client.server_sleeps(); });
  const uint64_t wakes = client.wakes_sent();
  RESOUND_CHECK(Text(client.Call(kEcho, Put(client, "next"), Soon()).payload) == "next");
  RESOUND_CHECK(client.wakes_sent() == wakes + 1 && !client.server_sleeps());
}

void StopEndsWaitingCalls(const std::string& dir) {
  auto service = std::make_shared<TestService>();
  auto server = std::make_unique<LocalServer>(LocalServerOptions{dir + "/b.sock", {}, 8, {}, "t"}, service);
  LocalClient client(server->path(), 4096, 4096, Soon());
  std::thread stopper([&] {
    WaitFor([&] { return service->waiting == 1; });
    server->Stop();
  });
  // The call waits in the service until the server stops: then it fails.
  RESOUND_CHECK(Throws<StatusError>([&] { client.Call(kWait, 0, Soon()); }));
  stopper.join();
  RESOUND_CHECK(service->abandoned == 1);
  RESOUND_CHECK(::access((dir + "/b.sock").c_str(), F_OK) != 0);  // the socket file is gone
  RESOUND_CHECK(Throws<std::system_error>([&] { LocalClient(dir + "/b.sock", 4096, 4096, Soon()); }));
}

void OtherUsersAreRefused(const std::string& dir) {
  auto service = std::make_shared<TestService>();
  const uid_t me = ::geteuid();
  if (me == 0) {
    // As root: a child that becomes another user is refused by its credentials.
    LocalServer server({dir + "/c.sock", {}, 8, {}, "t"}, service);
    // Both locks opened but the credential check: the child can reach and
    // connect to the socket, and is still refused.
    RESOUND_CHECK(::chmod(dir.c_str(), 0755) == 0 && ::chmod(server.path().c_str(), 0777) == 0);
    const pid_t child = ::fork();
    if (child == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
      try {
        LocalClient refused(dir + "/c.sock", 4096, 4096, Deadline::AfterSeconds(5));
        ::_exit(1);  // let in: wrong
      } catch (const StatusError&) {
        ::_exit(0);  // closed unanswered
      } catch (const std::system_error&) {
        ::_exit(4);  // could not connect: the credential check was not what refused it
      } catch (...) {
        ::_exit(2);
      }
    }
    int status = 0;
    RESOUND_CHECK(::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    RESOUND_CHECK(::chmod(dir.c_str(), 0700) == 0);
    RESOUND_CHECK(server.num_refused() == 1);
    LocalClient allowed(server.path(), 4096, 4096, Soon());  // its own user still gets in
  }
  // Any user: a server that allows only another uid refuses this one.
  LocalServer strict({dir + "/d.sock", {me + 1}, 8, {}, "t"}, service);
  RESOUND_CHECK(Throws<StatusError>([&] { LocalClient(strict.path(), 4096, 4096, Soon()); }));
  RESOUND_CHECK(strict.num_refused() == 1);
}

// Sends raw bytes (and descriptors) as one message on a new connection and
// reports whether the server answered with an error frame and closed it.
bool RefusedRaw(const std::string& path, std::span<const std::byte> message, std::span<const int> fds) {
  LocalSocket socket = LocalSocket::Connect(path);
  const std::span<const std::byte> parts[] = {message};
  socket.Send(parts, fds);
  MessageBuffer buffer;
  std::vector<UniqueFd> received;
  bool closed = false;
  for (int i = 0; i < 3 && !closed; ++i) {
    if (socket.WaitReadable(Soon()) != LocalSocket::Wait::kReadable) return false;
    closed = !socket.Receive(buffer, Frame::kHeaderBytes + Frame::kMaxInlineBytes, received);
  }
  return closed;
}

std::vector<std::byte> Hello(uint64_t upload, uint64_t download) {
  Frame hello;
  hello.kind = Frame::kHello;
  hello.length = 16;
  std::vector<std::byte> message(Frame::kHeaderBytes + 16);
  hello.Encode(std::span<std::byte, Frame::kHeaderBytes>(message.data(), Frame::kHeaderBytes));
  std::memcpy(message.data() + Frame::kHeaderBytes, &upload, 8);
  std::memcpy(message.data() + Frame::kHeaderBytes + 8, &download, 8);
  return message;
}

void BrokenClientsAreDroppedAndOthersServed(const std::string& dir) {
  auto service = std::make_shared<TestService>();
  ConnectionLimits limits;
  limits.max_region_bytes = 1 << 20;
  limits.handshake_seconds = 5;
  LocalServer server({dir + "/e.sock", {}, 64, limits, "t"}, service);
  // Regions of 4096 payload bytes (after the control page).
  SharedMemory sealed = SharedMemory::Create("test", 4096 + Doorbell::kControlBytes, false);
  const int sealed_fd = sealed.fd();
  // A region that can shrink under the server's mapping.
  const int unsealed = ::memfd_create("unsealed", MFD_CLOEXEC);
  RESOUND_CHECK(unsealed >= 0 && ::ftruncate(unsealed, 4096 + Doorbell::kControlBytes) == 0);
  RESOUND_CHECK(RefusedRaw(server.path(), Hello(4096, 4096), {&unsealed, 1}));
  ::close(unsealed);
  // Sizes that do not match the region, or above the server's limit.
  RESOUND_CHECK(RefusedRaw(server.path(), Hello(8192, 4096), {&sealed_fd, 1}));
  RESOUND_CHECK(RefusedRaw(server.path(), Hello(4096, uint64_t{1} << 40), {&sealed_fd, 1}));
  RESOUND_CHECK(RefusedRaw(server.path(), Hello(4096, 0), {&sealed_fd, 1}));
  // No region, or a request before the hello.
  RESOUND_CHECK(RefusedRaw(server.path(), Hello(4096, 4096), {}));
  Frame early;
  early.kind = Frame::kRequest;
  early.method = kEcho;
  std::vector<std::byte> request(Frame::kHeaderBytes);
  early.Encode(std::span<std::byte, Frame::kHeaderBytes>(request.data(), Frame::kHeaderBytes));
  RESOUND_CHECK(RefusedRaw(server.path(), request, {&sealed_fd, 1}));
  // Random bytes, some with a valid header's start.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::byte> junk = trial % 2 == 0 ? Hello(4096, 4096) : std::vector<std::byte>(1 + rng() % 100);
    for (int flip = 0; flip < 1 + static_cast<int>(rng() % 4); ++flip) {
      junk[rng() % junk.size()] = static_cast<std::byte>(rng());
    }
    LocalSocket socket = LocalSocket::Connect(server.path());
    const std::span<const std::byte> parts[] = {junk};
    try {
      socket.Send(parts, {&sealed_fd, 1});
    } catch (const std::system_error&) {
      // Closed unanswered already: on a busy host the junk comes faster than
      // the server's threads end, and past max_connections it refuses more.
    }
  }
  // (Their connections end as the server reads them; a busy host may still
  // count them against max_connections for a moment.)
  WaitFor([&] { return server.num_connections() == 0; });
  // After a handshake: a payload outside the region, a bad kind, two
  // descriptors, a doorbell count that skips frames (then a wake), a
  // larger upload region of 0 bytes.
  for (int kind = 0; kind < 5; ++kind) {
    LocalClient client(server.path(), 4096, 4096, Soon());
    if (kind == 3) {
      const uint64_t skipped = 5;
      std::memcpy(client.request_buffer() - Doorbell::kControlBytes, &skipped, sizeof skipped);
    }
    Frame frame;
    frame.kind = kind == 1 ? Frame::kWelcome : kind == 3 ? Frame::kWake : kind == 4 ? Frame::kRegion : Frame::kRequest;
    frame.method = kEcho;
    frame.flags = kind == 4 ? 0U : static_cast<uint32_t>(Frame::kInShared);
    frame.request_id = 1;
    frame.offset = kind == 0 ? 4000 : 0;
    frame.length = kind == 0 ? 200 : kind == 4 ? sizeof(uint64_t) : 0;
    std::array<std::byte, Frame::kHeaderBytes> header{};
    frame.Encode(header);
    LocalSocket raw(UniqueFd(::dup(client.fd())));
    const std::array<std::byte, sizeof(uint64_t)> no_bytes{};  // the region's size: 0
    const std::span<const std::byte> parts[] = {header, no_bytes};
    const int two_fds[] = {sealed_fd, sealed_fd};  // a call may carry one (its batch region)
    raw.Send(std::span<const std::span<const std::byte>>(parts, kind == 4 ? 2 : 1),
             kind == 2 ? std::span<const int>(two_fds)
             : kind == 4 ? std::span<const int>(&sealed_fd, 1)
                         : std::span<const int>());
    MessageBuffer buffer;
    std::vector<UniqueFd> fds;
    RESOUND_CHECK(raw.WaitReadable(Soon()) == LocalSocket::Wait::kReadable);
    RESOUND_CHECK(raw.Receive(buffer, Frame::kHeaderBytes + Frame::kMaxInlineBytes, fds));
    RESOUND_CHECK(Frame::Decode(buffer).kind == Frame::kError);
    RESOUND_CHECK(raw.WaitReadable(Soon()) == LocalSocket::Wait::kReadable);
    RESOUND_CHECK(!raw.Receive(buffer, Frame::kHeaderBytes + Frame::kMaxInlineBytes, fds));  // closed
  }
  // The server still serves a well-behaved client, and holds no broken one.
  LocalClient good(server.path(), 4096, 4096, Soon());
  RESOUND_CHECK(Text(good.Call(kEcho, Put(good, "still here"), Soon()).payload) == "still here");
  WaitFor([&] { return server.num_connections() == 1; });
}

// Frames rung through shared memory, with both sides sleeping as soon as
// they can (no spin): every request and answer may need its wake, and none
// may be lost (a lost one would leave its call waiting until the deadline).
void NoWakeIsLost(const std::string& dir) {
  auto service = std::make_shared<TestService>();
  ConnectionLimits limits;
  limits.spin_floor = limits.spin_ceiling = std::chrono::nanoseconds(0);
  LocalServer server({dir + "/wakes.sock", {}, 8, limits, "t"}, service);
  std::atomic<int> answered{0};
  std::atomic<uint64_t> wakes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      LocalClient client(server.path(), 4096, 4096, Soon());
      if (t > 0) client.SetSpin(std::chrono::nanoseconds(0));
      for (int i = 0; i < 2000; ++i) {
        const std::string text = std::to_string(t) + ":" + std::to_string(i);
        try {
          if (Text(client.Call(kEcho, Put(client, text), Soon()).payload) == text) ++answered;
        } catch (const std::exception&) {
          return;
        }
      }
      client.CheckOpen();  // a wake left over for an answer already taken is no hang-up
      wakes += client.wakes_sent();
    });
  }
  for (std::thread& thread : threads) thread.join();
  RESOUND_CHECK(answered == 6000);
  RESOUND_CHECK(wakes > 0);  // the server slept, and was woken

  // A wake that comes while a request runs (one for a frame already taken)
  // is not the client hanging up: the request goes on.
  LocalClient client(server.path(), 4096, 4096, Soon());
  client.Start(kLater, Put(client, "later"));
  WaitFor([&] { return service->looks > 0; });
  const LocalSocket raw(UniqueFd(::dup(client.fd())));
  Doorbell().SendWake(raw);  // a wake no frame was rung for
  const int looked = service->looks;
  WaitFor([&] { return service->looks > looked + 2; });  // it looked since
  service->released = true;
  const auto answer = client.Finish(Soon());
  RESOUND_CHECK(answer.has_value() && Text(answer->payload) == "later" && service->abandoned == 0);
  // The wake left unread is dropped before the next request.
  RESOUND_CHECK(Text(client.Call(kEcho, Put(client, "next"), Soon()).payload) == "next");

  // A region made larger for an answer that then failed is not the
  // client's yet: until it is sent, the server says it sleeps in the old.
  LocalClient grown(server.path(), 4096, 4096, Soon());
  RESOUND_CHECK(Throws<StatusError>([&] { grown.Call(kGrowThenFail, 0, Soon()); }));
  RESOUND_CHECK(grown.response_capacity() == 4096);
  for (int i = 0; i < 20; ++i) {
    RESOUND_CHECK(Text(grown.Call(kEcho, Put(grown, "after"), Deadline::AfterSeconds(2)).payload) == "after");
  }
  RESOUND_CHECK(grown.response_capacity() == 8192);  // it came with the next answer
}

void ClientsCannotWriteTheServersRegion() {
  SharedMemory server_side = SharedMemory::Create("download", 4096, true);
  std::memcpy(server_side.data(), "written", 7);  // the creator's own mapping still writes
  UniqueFd passed(::dup(server_side.fd()));
  SharedMemory client_side = SharedMemory::Adopt(std::move(passed), 4096, true);
  RESOUND_CHECK(std::memcmp(client_side.data(), "written", 7) == 0);
  // A writable mapping, or a write through the descriptor, is refused.
  RESOUND_CHECK(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, client_side.fd(), 0) == MAP_FAILED);
  RESOUND_CHECK(::pwrite(client_side.fd(), "x", 1, 0) < 0);
  RESOUND_CHECK(::ftruncate(client_side.fd(), 0) != 0);
  // An upload region without the write seal is refused where one is required.
  SharedMemory upload = SharedMemory::Create("upload", 4096, false);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { SharedMemory::Adopt(UniqueFd(::dup(upload.fd())), 4096, true); }));
  // Bytes a frame points at must lie in the region's payload area.
  SharedMemory region = SharedMemory::Create("region", Doorbell::kControlBytes + 4096, false);
  RESOUND_CHECK(Doorbell::PayloadView(region, 0, 4096).data() == region.data() + Doorbell::kControlBytes);
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { (void)Doorbell::PayloadView(region, 4000, 200); }));
  RESOUND_CHECK(Throws<InvalidArgumentError>([&] { (void)Doorbell::PayloadView(region, ~uint64_t{0}, 1); }));
}

void SpinningFollowsTheClientsGaps() {
  using std::chrono::microseconds;
  SpinBudget spin(microseconds(100), microseconds(1000));
  RESOUND_CHECK(spin.Next() == microseconds(100));  // nothing learnt yet: the floor
  spin.Waited(microseconds(150));                    // a client calling in a loop
  RESOUND_CHECK(spin.Next() == microseconds(400));
  spin.Waited(microseconds(800));  // twice its gap would pass the ceiling
  RESOUND_CHECK(spin.Next() == microseconds(1000));
  spin.Waited(microseconds(5000));  // a client that calls now and then
  RESOUND_CHECK(spin.Next() == microseconds(100));
}

}  // namespace
}  // namespace resound::local

int main() {
  const std::string dir = resound::local::TempDir();
  resound::local::CallsErrorsAndContinuations(dir);
  resound::local::CallsInTwoHalves(dir);
  resound::local::NextLaterRequestsLetTheServerSleep(dir);
  resound::local::StopEndsWaitingCalls(dir);
  resound::local::OtherUsersAreRefused(dir);
  resound::local::BrokenClientsAreDroppedAndOthersServed(dir);
  resound::local::NoWakeIsLost(dir);
  resound::local::ClientsCannotWriteTheServersRegion();
  resound::local::SpinningFollowsTheClientsGaps();
  ::rmdir(dir.c_str());
  return 0;
}

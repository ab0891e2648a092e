// A file descriptor that becomes readable when a table's rate limiter starts
// allowing what an event-driven server waits for: the asyncio server (see
// python/resound/_service/) watches it with its event loop instead of
// parking a thread in the limiter for every waiting call.
//
// A waiter arms one side (inserts or samples) through Table::ArmWake, which
// checks the limiter under the table lock; the limiter raises that side's
// bit once it allows the side again (or the table closes) and disarms it, so
// an idle table pays one branch per state change and nothing per waiter.
// The readable state is level-triggered until Take() consumes it.
#ifndef RESOUND_WAKE_SIGNAL_H_
#define RESOUND_WAKE_SIGNAL_H_

#include <atomic>
#include <cstdint>

namespace resound {

class WakeSignal {
 public:
  // Bits raised and taken; a table uses one per side.
  static constexpr uint32_t kInserts = 1;
  static constexpr uint32_t kSamples = 2;

  // Opens the descriptor (an eventfd on Linux, a pipe elsewhere), non-blocking
  // and close-on-exec; throws std::system_error if the process has none left.
  WakeSignal();
  ~WakeSignal();
  WakeSignal(const WakeSignal&) = delete;
  WakeSignal& operator=(const WakeSignal&) = delete;

  // The descriptor to watch for reading; owned by this object.
  int fd() const noexcept { return read_fd_; }

  // Adds `bits` and makes the descriptor readable (a write only when no bit
  // was pending, so a burst of state changes costs one system call).
  void Raise(uint32_t bits) noexcept;
  // The bits raised since the last Take, and the descriptor drained.
  uint32_t Take() noexcept;

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;  // the same descriptor as read_fd_ for an eventfd
  std::atomic<uint32_t> pending_{0};
};

}  // namespace resound

#endif  // RESOUND_WAKE_SIGNAL_H_

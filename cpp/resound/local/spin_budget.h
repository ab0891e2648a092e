// How long a connection's thread looks for the next request before it
// sleeps, learnt from the gaps between its client's requests.
//
// Waking a sleeping thread costs ~15 us here (far more on a busy host), a
// large share of a same-host round trip. A client calling in a loop (an
// actor's inserts, a writer flushing after every item, a learner's priority
// updates) sends its next request a regular tens to hundreds of
// microseconds after each answer: spinning that long saves the wake-up. A
// client that calls now and then (an actor stepping its environment for
// milliseconds) would only have the thread burn a core: after a gap longer
// than the ceiling, the thread spins just the floor.
//
// Example:
//   SpinBudget budget(std::chrono::microseconds(100), std::chrono::microseconds(1000));
//   const auto since = std::chrono::steady_clock::now();
//   bell.Wait(socket, budget.Next(), ...);  // (Doorbell)
//   budget.Waited(std::chrono::steady_clock::now() - since);
#ifndef RESOUND_LOCAL_SPIN_BUDGET_H_
#define RESOUND_LOCAL_SPIN_BUDGET_H_

#include <chrono>

namespace resound::local {

class SpinBudget {
 public:
  SpinBudget(std::chrono::nanoseconds floor, std::chrono::nanoseconds ceiling) noexcept;

  // How long to spin for the next request: twice the last gap plus the
  // floor (room for the client's jitter), at most the ceiling; the floor
  // alone after a gap longer than the ceiling.
  std::chrono::nanoseconds Next() const noexcept;

  // The gap measured from the last answer to the request that followed it.
  void Waited(std::chrono::nanoseconds gap) noexcept { last_gap_ = gap; }

 private:
  const std::chrono::nanoseconds floor_;
  const std::chrono::nanoseconds ceiling_;
  std::chrono::nanoseconds last_gap_{0};
};

}  // namespace resound::local

#endif  // RESOUND_LOCAL_SPIN_BUDGET_H_

// The client end of an insert stream: items queued by a writer, sent in
// batches as serialized InsertRequest messages (protos/resound/v1/replay.proto)
// and held until the server confirms them.
//
// Everything per item happens here in C++: a writer's item costs one call to
// Add, a message of a thousand items one call to TakeMessage, a confirmation
// one call to Confirm. Queued and unconfirmed items hold their chunks, so a
// stream that reconnects can send them again (Requeue). Each chunk is sent once
// per stream, and released on the server once no item on its way and no live
// handle anywhere in the process can use it again.
//
// Not thread-safe: the Python layer serializes calls.
#ifndef RESOUND_INSERT_REQUEST_ENCODER_H_
#define RESOUND_INSERT_REQUEST_ENCODER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "resound/chunk.h"
#include "resound/chunk_store.h"
#include "resound/shareable_blocks.h"
#include "resound/trajectory.h"

namespace resound {

class InsertRequestEncoder {
 public:
  // Room for `max_in_flight_items` queued and unconfirmed items holding
  // `max_in_flight_bytes` of payload (see HasRoom); 0: no limit.
  explicit InsertRequestEncoder(std::shared_ptr<const ChunkStore> store, size_t max_in_flight_items = 0,
                                int64_t max_in_flight_bytes = 0);
  InsertRequestEncoder(const InsertRequestEncoder&) = delete;
  InsertRequestEncoder& operator=(const InsertRequestEncoder&) = delete;

  // Queues an item for `table`. Throws NotFoundError if a chunk it uses is
  // not live in the store (nothing is queued then).
  void Add(const std::string& table, uint64_t key, double priority, Trajectory trajectory);

  // Writes the next message into the buffer `allocate(size)` returns (so the
  // caller owns it: chunk payloads are copied exactly once, into it): up to
  // `max_items` queued items (at least one, if any) while their new chunks
  // stay within `max_bytes`, moved to the unconfirmed ones. With
  // `data_tail`, in the same-host transport's layout (wire::WriteWithDataTail).
  // With an `arena` too, payloads in the arena are not copied but named
  // (wire::WriteWithDataTail): returns the handles of those chunks, which
  // the caller keeps until the receiver has answered the message.
  std::vector<std::shared_ptr<const Chunk>> TakeMessage(size_t max_items, size_t max_bytes,
                                                        const std::function<char*(size_t)>& allocate,
                                                        bool data_tail = false,
                                                        const PayloadBlockSource* arena = nullptr);

  // Drops unconfirmed items whose keys lead `keys` in order; keys that do not
  // match the oldest unconfirmed item (a confirmation from before a Requeue)
  // are skipped. Returns how many items were dropped.
  size_t Confirm(std::span<const uint64_t> keys);

  // A new stream: the server keeps nothing of the old one, so every
  // unconfirmed item goes back to the front of the queue and every chunk
  // counts as unsent.
  void Requeue();

  // Whether a chunk the server keeps for this stream is gone from the store
  // (TakeMessage would release it). A stream with nothing queued then sends
  // a message of releases alone: otherwise the server would keep the chunks
  // (and count them against its max_bytes) until the writer's next items,
  // after a reset or the items' removal too.
  bool HasReleasable() const;

  // When a writer thread should send the queued items itself instead of
  // leaving them to the stream's thread (see MessageDue): once `items` are
  // queued, their chunks hold `bytes`, or the oldest has waited `age`. 0
  // leaves a criterion out; all 0 (the default): never.
  void SetMessageDue(size_t items, int64_t bytes, std::chrono::nanoseconds age) noexcept;
  // Whether the queue holds a message's worth (SetMessageDue). A writer
  // that asks after each item sends a message per batch it makes, and its
  // items wait at most `age` for it (a clock read per call while `age` is set).
  bool MessageDue() const noexcept;

  size_t queued() const noexcept { return queue_.size(); }
  size_t unconfirmed() const noexcept { return unconfirmed_.size(); }
  size_t in_flight() const noexcept { return queued() + unconfirmed(); }
  // Payload bytes of the chunks of queued and unconfirmed items (a chunk
  // counts once per item using it).
  int64_t in_flight_bytes() const noexcept { return in_flight_bytes_; }
  // Whether the queued and unconfirmed items stay below both limits: a
  // writer may add another item without waiting for confirmations. (Add
  // answers it too, so that a writer learns it in the call it makes anyway.)
  bool HasRoom() const noexcept {
    return in_flight() < max_in_flight_items_ && in_flight_bytes_ < max_in_flight_bytes_;
  }

 private:
  struct Pending {
    uint32_t table = 0;  // index into tables_
    uint64_t key = 0;
    double priority = 0.0;
    Trajectory trajectory;
    std::vector<std::shared_ptr<const Chunk>> chunks;  // distinct
    int64_t bytes = 0;
  };

  std::shared_ptr<const ChunkStore> store_;
  const size_t max_in_flight_items_;
  const int64_t max_in_flight_bytes_;
  std::vector<std::string> tables_;
  std::unordered_map<std::string, uint32_t> table_index_;
  std::deque<Pending> queue_;
  std::deque<Pending> unconfirmed_;
  std::unordered_set<uint64_t> sent_;  // chunks the server keeps for this stream
  int64_t in_flight_bytes_ = 0;
  int64_t queued_bytes_ = 0;  // of the queued items alone (as in_flight_bytes_)
  // About when the oldest queued item was queued (set when the queue was
  // empty, and at each message for the items it left).
  std::chrono::steady_clock::time_point oldest_queued_at_{};
  size_t due_items_ = 0;
  int64_t due_bytes_ = 0;
  std::chrono::nanoseconds due_age_{0};
};

}  // namespace resound

#endif  // RESOUND_INSERT_REQUEST_ENCODER_H_

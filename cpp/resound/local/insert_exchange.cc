#include "resound/local/insert_exchange.h"

#include <memory>
#include <span>
#include <vector>

#include "resound/local/local_connection.h"
#include "resound/wire_messages.h"

namespace resound::local {

namespace {

// Confirms the items `answer` (an InsertResponse) names.
size_t ConfirmAnswer(InsertRequestEncoder& encoder, std::span<const std::byte> answer) {
  const std::vector<uint64_t> keys =
      wire::ReadInsertResponseKeys({reinterpret_cast<const uint8_t*>(answer.data()), answer.size()});
  return encoder.Confirm(keys);
}

}  // namespace

size_t StageInsert(LocalClient& client, InsertRequestEncoder& encoder, const MessageLimits& limits) {
  size_t staged = 0;
  std::vector<std::shared_ptr<const Chunk>> named = encoder.TakeMessage(
      limits.max_items, limits.max_bytes,
      [&client, &staged](size_t size) {
        client.EnsureRequestCapacity(size, Deadline::Never());
        staged = size;
        return reinterpret_cast<char*>(client.request_buffer());
      },
      /*data_tail=*/true, client.arena());
  // With arena refs exactly when an arena was passed (the table is
  // written even if no payload is in it).
  client.NoteStaged(client.arena() != nullptr);
  if (!named.empty()) client.HoldUntilAnswered({named.begin(), named.end()});
  return staged;
}

ExchangeOutcome ExchangeInsert(LocalClient& client, uint32_t method, InsertRequestEncoder& encoder,
                               size_t keep, const MessageLimits& limits, const Deadline& answer_deadline) {
  ExchangeOutcome outcome;
  while (true) {
    if (client.pending()) {
      // (A message sent ahead whose answer is not needed yet stays on its
      // way: the server stores it while the writer makes its next items.)
      if (encoder.in_flight() <= keep) break;
      const std::optional<LocalClient::Response> answer = client.Finish(answer_deadline);
      if (!answer) break;
      try {
        outcome.confirmed += ConfirmAnswer(encoder, answer->payload);
      } catch (...) {
        // A malformed answer: whatever the server meant next (the rest of
        // an answer in parts) cannot be followed, so the connection ends.
        client.Shutdown();
        throw;
      }
      // An answer in parts (a rate limiter holds the rest of its items):
      // the rest is asked for now, and read as any message's answer.
      if (answer->more) client.Start(LocalConnection::kContinueMethod, 0);
      continue;
    }
    if (encoder.queued() == 0) break;
    const size_t size = StageInsert(client, encoder, limits);
    // A turn that does not wait (a writer sending between items) leaves
    // the answer to its next turn, a batch of items later: looking for it
    // now would find nothing, and the server need not look for the next.
    const bool between_items = answer_deadline.has_passed();
    client.Start(method, size, client.staged_layout(), between_items);
    outcome.sent = true;
    if (between_items) break;
  }
  outcome.awaiting = client.pending();
  return outcome;
}

}  // namespace resound::local

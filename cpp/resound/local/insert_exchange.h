// A same-host insert stream's messages, staged and exchanged by the thread
// that wants them sent: the stream's own (StageInsert, then a Call) or a
// writer that waits for its items (ExchangeInsert: read the answer to the
// message on its way, confirm its items, send the queued ones).
//
// A writer that flushes after every item (Acme's adders) runs this once per
// flush: everything between its Python call and the server's answer stays
// here, without the GIL, instead of half a dozen Python calls and the
// objects between them (they cost more than the local round trip).
//
// Neither is thread-safe: the caller holds the insert stream's lock, which
// serializes every use of the encoder and of the stream's connection.
//
// Example (a writer keeping one item unconfirmed, answers read for up to a
// millisecond):
//   const ExchangeOutcome outcome =
//       ExchangeInsert(client, kInsertMethod, encoder, /*keep=*/1, {}, Deadline::AfterSeconds(0.001));
//   if (outcome.awaiting && encoder.in_flight() > 1) { /* not answered yet: wait again */ }
#ifndef RESOUND_LOCAL_INSERT_EXCHANGE_H_
#define RESOUND_LOCAL_INSERT_EXCHANGE_H_

#include <cstddef>
#include <cstdint>

#include "resound/deadline.h"
#include "resound/insert_request_encoder.h"
#include "resound/local/local_client.h"

namespace resound::local {

// How much one insert message may carry (the stream's limits).
struct MessageLimits {
  size_t max_items = 1024;
  size_t max_bytes = size_t{32} << 20;
};

// Writes the encoder's next insert message into `client`'s upload region
// (grown if it is too small), its chunk payloads in the data tail, named in
// the client's payload arena where they are there; returns its size, for
// LocalClient::Call or Start with client.staged_layout().
size_t StageInsert(LocalClient& client, InsertRequestEncoder& encoder, const MessageLimits& limits);

// What ExchangeInsert did, for the caller's bookkeeping.
struct ExchangeOutcome {
  size_t confirmed = 0;   // items the answers it read confirmed
  bool sent = false;      // it started a message
  bool awaiting = false;  // a request is on its way, its answer unread
};

// Reads answers and sends queued items (in messages within `limits`), as
// one request at a time allows, until at most `keep` items are queued or
// unconfirmed; then sends whatever is still queued ahead if no request is
// on its way. Waits for an answer until `answer_deadline`: one that has not
// come by then stays pending (outcome.awaiting), as does a message sent
// ahead. After an answer in parts it asks for the rest (a Continue
// request, read as any answer). With a deadline that has passed (a writer
// between items) it looks for the answer once, and a message it sends
// ends the turn and says that the next request comes later (kNextLater).
// The caller must not have an answer in parts unread. Errors as
// LocalClient's calls, and InvalidArgumentError for a malformed answer:
// either leaves the connection broken.
ExchangeOutcome ExchangeInsert(LocalClient& client, uint32_t method, InsertRequestEncoder& encoder,
                               size_t keep, const MessageLimits& limits, const Deadline& answer_deadline);

}  // namespace resound::local

#endif  // RESOUND_LOCAL_INSERT_EXCHANGE_H_

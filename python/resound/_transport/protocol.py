"""What a Client and its writers call on a transport, written down once.

Three protocols, from the Client's view down to one writer's:

* ``Transport``: the tables of one server or of several, as the Client API
  (resound.client) uses them: sampling, priorities, infos, checkpoints, and
  the choice of the one server a writer or an ``insert`` call goes to.
  Implemented by every transport: ``embedded.EmbeddedTransport`` (a server
  of this process, called directly), ``remote.RemoteTransport`` (gRPC),
  ``factory.AddressTransport`` (one address: embedded or gRPC, chosen at
  each call) and ``server_set.ServerSet`` (several servers).
* ``ServerTransport``: one server's transport (embedded, gRPC; a same-host
  shared-memory transport is to come), which writers and ``insert`` write
  through: chunks, insert streams, one call's inserts and samples.
* ``InsertLink``: what a writer sends its items through
  (``ServerTransport.open_insert_stream``): the embedded transport itself,
  whose inserts are done when they return, or a remote insert stream.

A writer's item goes ``TrajectoryWriter.create_item`` ->
``InsertLink.insert_one`` / ``insert`` -> the core table's ``insert_one`` /
``insert_batch`` (embedded) or the stream's encoder and the Insert call
(remote, resound._transport.insert_stream).

Timeouts are seconds, None waits forever; a wait that runs out raises
``resound.errors.DeadlineExceededError``. A server that went away raises
ConnectionError (a member of several) or is waited for (one server).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from resound import _core
    from resound._transport.sample_stream import SampleStream
    from resound.priority_histogram import PriorityHistogram
    from resound.specs import TensorSpec
    from resound.table_info import TableInfo

__all__ = ["InsertLink", "ServerTransport", "TableMeta", "Take", "Transport"]

# take(count, deadline, cancelled): sample batches holding `count` samples
# in all (see Transport.taker).
Take = Callable[[int, "float | None", "threading.Event | None"], list[Any]]


@dataclasses.dataclass(frozen=True)
class TableMeta:
    """What writers check before creating an item for a table."""

    name: str
    prioritized: bool
    signature: Any
    flat_signature: list[TensorSpec] | None


class Transport(Protocol):
    """The tables of one server, or of several with the same tables."""

    @property
    def addresses(self) -> list[str]:
        """Each server's ``'host:port'`` (``'in-process'`` for a server that
        does not listen; a ``dns:`` target resolved now)."""
        ...

    def one_server(
        self, tables: Iterable[str] = (), timeout: float | None = None
    ) -> ServerTransport:
        """The transport of the one server a new writer, or one ``insert``
        call, writes to: this transport for one server; with several, the
        next in turn (with ``tables``: the next that answers for them,
        waiting up to ``timeout`` while none does), so that an item and
        its chunks land on one server."""
        ...

    def table_info_for_writer(self, name: str, timeout: float | None = None) -> TableMeta:
        """Table ``name``'s options as writers check them (NotFoundError
        naming the tables if there is none)."""
        ...

    def taker(self, table: str, *, flexible: bool = False) -> Take:
        """``take(count, deadline, cancelled)``: sample batches from
        ``table`` holding ``count`` samples in all, fewer if the deadline
        (time.monotonic()) passes after the first sample or the event
        ``cancelled`` is set; DeadlineExceededError if none came in time.
        ``flexible``: as many as the rate limiters give at once (at least
        one). The server(s) are those of this transport now."""
        ...

    def open_sample_stream(self, table: str) -> SampleStream | None:
        """A stream of sample requests to ``table`` whose requests proceed
        while earlier answers are read (one gRPC server); None where there
        is none to gain (in-process, several servers): use ``taker``."""
        ...

    def signature(self, table: str) -> Any:
        """Table ``table``'s signature (None if it has none)."""
        ...

    def mutate_priorities(
        self,
        table: str,
        updates: Mapping[int, float] | Iterable[tuple[int, float]] | tuple[Any, Any] | None,
        deletes: Iterable[int] | None,
    ) -> tuple[int, int]:
        """Sets priorities (a dict, (key, priority) pairs, or a pair of
        arrays) and deletes keys, all or nothing; returns (updated, deleted).
        Missing keys are ignored."""
        ...

    def reset(self, table: str) -> None:
        """Removes every item of ``table`` and zeroes its limiter's counters."""
        ...

    def server_info(self, timeout: float | None) -> dict[str, TableInfo]:
        """Every table's info by name (several servers: summed)."""
        ...

    def server_infos(self, timeout: float | None) -> dict[str, dict[str, TableInfo]]:
        """``server_info`` of each server that answers, by address."""
        ...

    def priority_histogram(self, table: str, bins: int, timeout: float | None) -> PriorityHistogram:
        """How ``table``'s priorities spread, in ``bins`` (checked) bins,
        counted by the server (several servers: merged, see
        resound.priority_histogram.merged)."""
        ...

    def priority_histograms(
        self, table: str, bins: int, timeout: float | None
    ) -> dict[str, PriorityHistogram]:
        """``priority_histogram`` of each server that answers, by address."""
        ...

    def checkpoint(self) -> Any:
        """Has the server(s) write a checkpoint: its directory (one server)
        or the directories by address (several)."""
        ...

    def turn_for_copy(self) -> int | None:
        """Where a pickled copy of the client starts its turn over the
        servers (None: one server, no turns)."""
        ...

    def close_client_stream(self) -> None:
        """The client is gone: ends what served its own calls (streams kept
        open between them), not its writers' streams. Does not wait: this
        runs in finalizers."""
        ...

    def close(self) -> None:
        """``Client.close()``: ends every call and connection of the
        transport, its writers' streams included."""
        ...


class ServerTransport(Transport, Protocol):
    """One server's transport: what writers and ``Client.insert`` write through."""

    @property
    def address(self) -> str:
        """The server's ``'host:port'`` (``'in-process'`` if it does not listen)."""
        ...

    def add_chunk(
        self,
        key: int,
        payload: Any,
        dtype: str,
        shape: tuple[int, ...],
        num_steps: int,
        compression: str = "none",
        delta_encoded: bool = False,
        episode_id: int = 0,
        start_step: int = 0,
        end_step: int | None = None,
    ) -> _core.Chunk:
        """Copies ``payload`` into a new chunk of the transport's chunk store
        (where items of this server may use it) and returns its handle."""
        ...

    def get_chunk(self, key: int) -> _core.Chunk:
        """The handle of the live chunk ``key`` (KeyError if it is gone)."""
        ...

    def column_chunker(
        self, dtype: str, shape: tuple[int, ...], max_chunk_length: int, keep_alive: int
    ) -> _core.ColumnChunker:
        """A writer column's chunker for uncompressed numeric rows, over the
        transport's chunk store (see ``resound._core.ColumnChunker``)."""
        ...

    def open_insert_stream(
        self, on_error: Callable[[BaseException], None] | None = None
    ) -> InsertLink:
        """The link a new writer sends its items through; ``on_error`` is
        told of a failure that ends it (a remote stream's, in its thread)."""
        ...

    def insert(self, table: str, requests: list[Any], timeout: float | None) -> int:
        """Inserts (key, priority, trajectory) triples into ``table`` in
        order, waiting up to ``timeout`` for the rate limiter (remote: until
        the server confirms them); returns how many went in."""
        ...

    def insert_step(
        self, items: list[tuple[str, int, float]], arrays: list[Any], chunk_keys: list[int],
        episode_id: int,
    ) -> bool:  # fmt: skip
        """``Client.insert`` without a timeout by a path of the transport's
        own: one step (``arrays``, C-contiguous, a one-step chunk each under
        ``chunk_keys``) as an item per (table, key, priority) of ``items``,
        waiting as long as the rate limiters hold them. False if the
        transport has no such path now: the caller then makes the chunks
        (``add_chunk``) and inserts the items (``insert``) itself."""
        ...

    def sample(self, table: str, num_samples: int, timeout: float | None) -> Any:
        """One batch of up to ``num_samples`` samples of ``table`` (as many
        as the rate limiter gives at once, at least one), shaped like the
        core's ``SampleBatch``."""
        ...


class InsertLink(Protocol):
    """A writer's way to its server's tables (see the module doc)."""

    @property
    def in_flight(self) -> int:
        """Items sent and not yet confirmed in their tables."""
        ...

    @property
    def error(self) -> BaseException | None:
        """What ended the link, if anything did (then every call raises it)."""
        ...

    def table_info_for_writer(self, name: str) -> TableMeta:
        """Table ``name``'s options, from the server the link writes to."""
        ...

    def insert(self, table: str, requests: list[Any], timeout: float | None) -> int:
        """Inserts (key, priority, trajectory) triples in order, waiting up
        to ``timeout`` for the rate limiter (writers pass 0 and queue what
        is refused); returns how many went in. DeadlineExceededError carries
        ``num_inserted``. A remote link accepts them at once (the server's
        limiter holds its stream up instead)."""
        ...

    def insert_one(
        self,
        table: str,
        key: int,
        priority: float,
        chunk_key: int,
        offset: int,
        length: int,
        squeeze: bool,
        timeout: float | None,
    ) -> int:
        """``insert`` of one item of one column of one slice, without the
        nested lists: the most common item, on writers' hot path."""
        ...

    def wait(self, keep: int, timeout: float | None, call: str) -> None:
        """Blocks until at most ``keep`` items are unconfirmed;
        DeadlineExceededError (naming ``call``) after ``timeout``."""
        ...

    def close(self, wait: bool = True) -> None:
        """Ends the link; unconfirmed items are dropped. ``wait=False`` does
        not wait for its thread (finalizers)."""
        ...

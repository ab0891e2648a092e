"""The in-process transport: the Client calls the C++ core directly.

No socket, no serialisation: chunks go into the process-wide chunk store,
items into the core tables, and samples come back as core ``SampleBatch``
objects. The GIL is released inside every core call that waits or copies.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from resound import _core, wait_warnings
from resound._transport.one_server import OneServerTransport
from resound._transport.protocol import TableMeta
from resound.errors import DeadlineExceededError
from resound.priority_histogram import PriorityHistogram
from resound.table import shared_chunk_store
from resound.table_info import TableInfo

if TYPE_CHECKING:
    from resound._table_host import TableHost
    from resound.table import Table

__all__ = ["EmbeddedTransport"]

# Long waits for a rate limiter happen in slices this long: the core waits
# without the GIL, and Python only handles signals (Ctrl-C) between calls.
_WAIT_SLICE_SECONDS = 0.1


def _slice(deadline: float | None) -> float:
    if deadline is None:
        return _WAIT_SLICE_SECONDS
    return min(_WAIT_SLICE_SECONDS, max(0.0, deadline - time.monotonic()))


class EmbeddedTransport(OneServerTransport):
    """Calls the tables of a server in this process (a ServerTransport, and
    its writers' InsertLink: see resound._transport.protocol).

    ``address`` is the one its client was given (``'in-process'`` for a
    server that does not listen).
    """

    address: str

    def __init__(self, server: TableHost, address: str | None = None) -> None:
        self._server = server
        if address is None:
            address = "in-process" if server.port is None else f"localhost:{server.port}"
        self.address = address
        self._store = shared_chunk_store()
        # add_chunk(key, payload, dtype, shape, num_steps, compression="none",
        #           delta_encoded=False, episode_id=0, start_step=0, end_step=None)
        # copies the payload into a new chunk and returns its handle. It is
        # the store's own method: writers call it once per chunk.
        self.add_chunk = self._store.add
        # get_chunk(key) -> the live chunk's handle (KeyError if gone).
        self.get_chunk = self._store.get
        # The core tables' insert calls by table name (the writers' hot path).
        self._inserts: dict[str, Any] = {}
        self._inserts_one: dict[str, Any] = {}

    # --- the InsertLink face (see insert_stream.InsertStream): in-process
    # inserts are done when insert() returns, so nothing is ever in flight.

    in_flight = 0
    error = None

    def open_insert_stream(self, on_error: Any = None) -> EmbeddedTransport:
        del on_error
        return self

    def wait(self, keep: int, timeout: float | None, call: str) -> None:
        del keep, timeout, call

    def close(self, wait: bool = True) -> None:
        del wait

    def column_chunker(
        self, dtype: str, shape: tuple[int, ...], max_chunk_length: int, keep_alive: int
    ) -> Any:
        """A writer column's chunker for uncompressed numeric rows: ``append(row,
        episode_id, step)`` returns the row's chunk key; complete chunks go to
        the store and stay alive while a row is in the keep-alive window (see
        ``resound._core.ColumnChunker``)."""
        return _core.ColumnChunker(self._store, dtype, shape, max_chunk_length, keep_alive)

    @property
    def server(self) -> TableHost:
        return self._server

    def _table(self, name: str) -> Table:
        return self._server.table(name)

    def table_info_for_writer(self, name: str, timeout: float | None = None) -> TableMeta:
        del timeout  # the server is here: nothing to wait for
        table = self._table(name)
        return TableMeta(name, table._prioritized, table.signature, table._flat_signature)

    def insert(self, table: str, requests: list[Any], timeout: float | None) -> int:
        """Inserts (key, priority, trajectory) triples in order; returns how
        many went in. DeadlineExceededError carries ``num_inserted``."""
        insert = self._inserts.get(table)
        if insert is None:
            insert = self._inserts[table] = self._table(table)._core.insert_batch
        if timeout is not None and timeout <= _WAIT_SLICE_SECONDS:
            return insert(requests, timeout)
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        done = 0
        blocked: wait_warnings.BlockedWait | None = None
        while True:
            try:
                return done + insert(requests[done:] if done else requests, _slice(deadline))
            except DeadlineExceededError as error:
                done += error.num_inserted
                if deadline is not None and time.monotonic() >= deadline:
                    error.num_inserted = done
                    raise
                if blocked is None:
                    blocked = wait_warnings.BlockedWait(
                        wait_warnings.WRITER_LOGGER, "insert", started
                    )
                blocked.warn_if_due(str(error))

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
        """``insert`` of one item of one column of one slice: the core
        table's own call (writers pass ``timeout`` 0, at most a wait slice)."""
        insert = self._inserts_one.get(table)
        if insert is None:
            insert = self._inserts_one[table] = self._table(table)._core.insert_one
        return insert(key, priority, chunk_key, offset, length, squeeze, timeout)

    def sample(self, table: str, num_samples: int, timeout: float | None) -> Any:
        sample = self._table(table)._core.sample
        if timeout is not None and timeout <= _WAIT_SLICE_SECONDS:
            return sample(num_samples, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return sample(num_samples, _slice(deadline))
            except DeadlineExceededError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    def mutate_priorities(
        self,
        table: str,
        updates: Mapping[int, float] | Iterable[tuple[int, float]] | None,
        deletes: Iterable[int] | None,
    ) -> tuple[int, int]:
        return self._table(table)._core.mutate_priorities(updates, deletes)

    def reset(self, table: str) -> None:
        self._table(table)._core.reset()

    def checkpoint(self) -> str:
        return self._server.checkpoint()

    def server_info(self, timeout: float | None) -> dict[str, TableInfo]:
        del timeout  # the tables are right here
        return {name: table.info for name, table in self._server.tables.items()}

    def priority_histogram(self, table: str, bins: int, timeout: float | None) -> PriorityHistogram:
        """The core table's own count, under its lock (without the GIL).

        Example:
            >>> import resound
            >>> server = resound.Server([resound.Table.queue('q', 10)])
            >>> server.in_process_client().insert([1], priorities={'q': 2.0})
            >>> EmbeddedTransport(server).priority_histogram('q', 4, None)
            PriorityHistogram(counts=(1,), min_priority=2.0, max_priority=2.0)
        """
        del timeout  # the table is right here
        return PriorityHistogram.from_core(self._table(table)._core.priority_histogram(bins))

    def signature(self, table: str) -> Any:
        return self._table(table).signature

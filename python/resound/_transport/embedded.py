"""The in-process transport: the Client calls the C++ core directly.

No socket, no serialisation: chunks go into the process-wide chunk store,
items into the core tables, and samples come back as core ``SampleBatch``
objects. The GIL is released inside every core call that waits or copies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from resound import _core
from resound.table import shared_chunk_store
from resound.table_info import TableInfo

if TYPE_CHECKING:
    from resound.server import Server
    from resound.specs import TensorSpec
    from resound.table import Table

__all__ = ["EmbeddedTransport", "TableMeta"]


@dataclasses.dataclass(frozen=True)
class TableMeta:
    """What writers check before creating an item for a table."""

    name: str
    prioritized: bool
    signature: Any
    flat_signature: list[TensorSpec] | None


class EmbeddedTransport:
    """Calls the tables of a Server in this process."""

    def __init__(self, server: Server) -> None:
        self._server = server
        self._store = shared_chunk_store()
        self._add = self._store.add

    @property
    def server(self) -> Server:
        return self._server

    def _table(self, name: str) -> Table:
        return self._server.table(name)

    def table_info_for_writer(self, name: str) -> TableMeta:
        table = self._table(name)
        return TableMeta(name, table._prioritized, table.signature, table._flat_signature)

    def add_chunk(
        self,
        key: int,
        payload: Any,
        dtype: str,
        shape: tuple[int, ...],
        num_steps: int,
        *,
        compression: str = "none",
        delta_encoded: bool = False,
        episode_id: int = 0,
        start_step: int = 0,
        end_step: int | None = None,
    ) -> _core.Chunk:
        return self._add(
            key,
            payload,
            dtype,
            shape,
            num_steps,
            compression=compression,
            delta_encoded=delta_encoded,
            episode_id=episode_id,
            start_step=start_step,
            end_step=end_step,
        )

    def insert(self, table: str, requests: list[Any], timeout: float | None) -> int:
        """Inserts (key, priority, trajectory) triples in order; returns how
        many went in. DeadlineExceededError carries ``num_inserted``."""
        return self._table(table)._core.insert_batch(requests, timeout)

    def sample(self, table: str, num_samples: int, timeout: float | None) -> Any:
        return self._table(table)._core.sample(num_samples, timeout)

    def mutate_priorities(
        self,
        table: str,
        updates: Mapping[int, float] | Iterable[tuple[int, float]] | None,
        deletes: Iterable[int] | None,
    ) -> tuple[int, int]:
        return self._table(table)._core.mutate_priorities(updates, deletes)

    def reset(self, table: str) -> None:
        self._table(table)._core.reset()

    def server_info(self, timeout: float | None) -> dict[str, TableInfo]:
        del timeout  # the tables are right here
        return {name: table.info for name, table in self._server.tables.items()}

    def signature(self, table: str) -> Any:
        return self._table(table).signature

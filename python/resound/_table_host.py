"""``TableHost``: what serves tables, as the layers below the public API see it.

``resound.Server`` is the one implementation. The gRPC service
(resound._service) and the embedded transport (resound._transport.embedded)
depend on this interface, not on ``Server``, so that neither imports the
public API (which imports them): the layers import downward only (see
tests/system/test_import_layers.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from resound.table import Table

__all__ = ["TableHost"]


class TableHost(Protocol):
    """Tables served together: by name, with their lifetime, limits and checkpoints."""

    @property
    def running(self) -> bool:
        """False once stopped: the tables are closed and calls raise CancelledError."""
        ...

    @property
    def tables(self) -> dict[str, Table]:
        """Every hosted table by name (a copy)."""
        ...

    @property
    def max_bytes(self) -> int | None:
        """The most chunk bytes gRPC inserts may take the host to (None: no limit)."""
        ...

    @property
    def port(self) -> int | None:
        """The port it serves gRPC on; None if it does not listen."""
        ...

    def table(self, name: str) -> Table:
        """The table called ``name``; NotFoundError naming the tables if there is none."""
        ...

    def stop(self) -> None:
        """Closes every table and stops serving (idempotent)."""
        ...

    def checkpoint(self) -> str:
        """Writes a checkpoint of every table; returns its directory (OSError
        if the disk refuses)."""
        ...

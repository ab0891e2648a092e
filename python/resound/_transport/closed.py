"""The transport of a closed Client: every call raises, naming what to do.

``Client.close()`` puts one in place of the client's transport, so that a
call after it fails at once with a clear message instead of with whatever a
closed gRPC channel says, and no call needs a check of its own.

Example:
    >>> ClosedTransport('localhost:8000').server_info(None)
    Traceback (most recent call last):
    ...
    RuntimeError: Client of localhost:8000 is closed (Client.close() was called); make a new Client
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["ClosedTransport"]


class ClosedTransport:
    """Stands in for a closed client's transport."""

    def __init__(self, address: str) -> None:
        self._address = address

    @property
    def addresses(self) -> list[str]:
        self._refuse()

    def close(self) -> None:
        pass

    def close_client_stream(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        # Only names the class lacks come here: every transport call.
        return self._refuse

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        del args, kwargs
        raise RuntimeError(
            f"Client of {self._address} is closed (Client.close() was called); make a new Client"
        )

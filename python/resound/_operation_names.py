"""Errors in the user's terms: the operation they called, not the RPC.

The transports name a failed call by its gRPC method (``ServerInfo``,
``Insert``, ``Sample from table 't'``), which is how they know it; but a
``client.insert`` that fails while looking up the table's signature should
say ``insert``, not ``ServerInfo``. Each public operation is wrapped
(``names_operation``) so that an error raised through it has its leading
RPC name replaced by the operation's, and gains the server's address when
it does not name it already. The rest of the message (gRPC's own detail)
is kept. The exception object is the same one, of the same type, with its
attributes (such as ``DeadlineExceededError.num_inserted``).

Example:
    >>> error = ConnectionError("ServerInfo: failed to connect (refused)")
    >>> rename(error, "insert", ["localhost:1"])
    >>> str(error)
    'insert at localhost:1: failed to connect (refused)'
    >>> error = ValueError("Sample from table 't': the server at localhost:1 went away")
    >>> rename(error, "sample", ["localhost:1"])
    >>> str(error)
    "sample from table 't': the server at localhost:1 went away"
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from resound._wire.operation import RPC_NAME, mark

__all__ = ["mark", "names_operation", "rename", "rename_for", "renamed_calls"]

F = TypeVar("F", bound=Callable[..., Any])


def rename(error: BaseException, operation: str, addresses: Sequence[str]) -> None:
    """Replaces the RPC name that starts ``error``'s message with
    ``operation`` and names ``addresses`` if the message does not; leaves
    any other error as it is."""
    if not error.args or not isinstance(error.args[0], str):
        return
    # The outermost operation names the error (a legacy Writer.flush runs
    # TrajectoryWriter.flush), so each renaming starts from the transport's text.
    text = getattr(error, "_resound_rpc_text", error.args[0])
    match = RPC_NAME.match(text)
    if match is None:
        return
    head, separator, detail = text[match.end() :].partition(": ")
    if not separator:
        head, detail = "", text[match.end() :].lstrip(": ")
    named = [address for address in addresses if address in text]
    where = "" if named or not addresses else f" at {', '.join(addresses)}"
    error.args = (f"{operation}{head}{where}: {detail}", *error.args[1:])
    with contextlib.suppress(AttributeError):  # an exception type without a __dict__
        error._resound_rpc_text = text  # type: ignore[attr-defined]


def rename_for(error: BaseException, operation: str, owner: Any) -> None:
    """``rename`` with the addresses of ``owner``'s ``_error_addresses()``,
    as every wrapper here does; a hot method (``create_item``) calls it
    itself, and is ``mark``-ed, instead of paying for ``names_operation``'s
    generic frame."""
    rename(error, operation, _addresses(owner))


def _addresses(owner: Any) -> list[str]:
    try:
        return list(owner._error_addresses())
    except Exception:  # noqa: BLE001 - naming the address must never hide the error
        return []


def names_operation(operation: str) -> Callable[[F], F]:
    """Decorates a public method: errors through it name ``operation`` (see
    ``rename``); the owner's ``_error_addresses()`` gives the addresses."""

    def decorate(method: F) -> F:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            # A marked frame: its `operation` names the warnings logged
            # meanwhile (resound._wire.operation).
            try:
                return method(self, *args, **kwargs)
            except Exception as error:
                rename_for(error, operation, self)
                raise

        mark(call.__code__)
        functools.update_wrapper(call, method)
        return call  # type: ignore[return-value]

    return decorate


def renamed_calls(function: Callable[..., Any], operation: str, owner: Any) -> Callable[..., Any]:
    """``function``, its errors (and warnings) naming ``operation``: for a
    public operation's work on another thread (a prefetching iterator)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as error:
            rename_for(error, operation, owner)
            raise

    mark(call.__code__)
    functools.update_wrapper(call, function)
    return call

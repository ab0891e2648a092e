"""The public operation a thread is running (``insert``, ``sample``, ...),
for words a user reads: the transports name calls by their RPC
(``ServerInfo``, ``Insert``), which is not what the user called.

The public API sets ``CURRENT`` around each operation
(resound._operation_names); ``public_name`` puts it in place of the RPC
name that starts a text, so the waiting warnings of an ``insert`` say
``insert``. Plain Python, no gRPC: the API can import it.

Example:
    >>> token = CURRENT.set("insert")
    >>> public_name("ServerInfo")
    'insert'
    >>> public_name("Sample from table 'q'")
    'insert'
    >>> CURRENT.reset(token)
    >>> public_name("Sample from table 'q'")
    "Sample from table 'q'"
"""

from __future__ import annotations

import contextvars
import re

__all__ = ["CURRENT", "RPC_NAME", "public_name"]

CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "resound_operation", default=None
)

# The gRPC methods of replay.proto, as the transports name failed calls.
RPC_NAME = re.compile(
    r"^(?:Insert|SampleStream|Sample|MutatePrioritiesStream|MutatePriorities|Reset|"
    r"ServerInfo|Checkpoint)\b"
)


def public_name(what: str) -> str:
    """``what`` (a transport's name of a call), or the public operation
    running, if any, when ``what`` starts with an RPC name. The operation's
    own words stand for all of it: ``sample`` already names its table."""
    operation = CURRENT.get()
    if operation is None or RPC_NAME.match(what) is None:
        return what
    return operation

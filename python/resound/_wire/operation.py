"""The public operation a thread is running (``insert``, ``sample``, ...),
for words a user reads: the transports name calls by their RPC
(``ServerInfo``, ``Insert``), which is not what the user called.

The public API runs each operation in a marked frame
(resound._operation_names): a function whose code is ``mark``-ed with the
operation's name, or with None when its local ``operation`` holds it. ``current`` finds the
outermost such frame on the calling thread's stack, and ``public_name``
puts its operation in place of the RPC name that starts a text, so the
waiting warnings of an ``insert`` say ``insert``. Plain Python, no gRPC:
the API can import it.

The stack is read only when a warning is written. Recording the operation
on every call instead (a context variable set and reset around it) cost
~0.5 us per call, a tenth of a writer's whole ``create_item``.

Example:
    >>> def insert_like():
    ...     operation = "insert"
    ...     return public_name("ServerInfo"), public_name("Sample from table 'q'")
    >>> mark(insert_like.__code__)
    >>> insert_like()
    ('insert', 'insert')
    >>> public_name("Sample from table 'q'")
    "Sample from table 'q'"
"""

from __future__ import annotations

import re
import sys
from types import CodeType, FrameType

__all__ = ["RPC_NAME", "current", "mark", "public_name"]

# The gRPC methods of replay.proto, as the transports name failed calls.
RPC_NAME = re.compile(
    r"^(?:Insert|SampleStream|Sample|MutatePrioritiesStream|MutatePriorities|Reset|"
    r"ServerInfo|Checkpoint)\b"
)

# Code of the functions that run a public operation -> the operation's
# name, or None where the frame's local `operation` holds it (a wrapper's
# code, shared by every operation it wraps).
_MARKED: dict[CodeType, str | None] = {}


def mark(code: CodeType, operation: str | None = None) -> None:
    """Frames running ``code`` run ``operation`` (None: the one named by
    their local ``operation``)."""
    _MARKED[code] = operation


def current() -> str | None:
    """The outermost public operation on this thread's stack, if any (a
    legacy ``Writer.flush`` runs ``TrajectoryWriter.flush``: it is the
    former)."""
    found = None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code in _MARKED:
            found = _MARKED[code] or frame.f_locals.get("operation", found)
        frame = frame.f_back
    return found


def public_name(what: str) -> str:
    """``what`` (a transport's name of a call), or the public operation
    running, if any, when ``what`` starts with an RPC name. The operation's
    own words stand for all of it: ``sample`` already names its table."""
    if RPC_NAME.match(what) is None:
        return what
    operation = current()
    return what if operation is None else operation

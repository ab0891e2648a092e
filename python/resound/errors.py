"""Errors raised by resound, named as in Reverb.

``ReverbError`` is the base of resound's own errors;
``DeadlineExceededError`` (also a ``TimeoutError``) is raised when a call
reaches its timeout and
``CancelledError`` (also a ``RuntimeError``) when a table is closed while or
before the call runs. ``CheckpointError`` (also a ``ValueError``) refuses a
checkpoint file that is truncated, corrupted, foreign or of an unknown
version, naming the file and what is wrong. ``ResourceExhaustedError`` (also a
``RuntimeError``) refuses an insert that would take a server past its
``max_bytes``. ``NotFoundError`` (unknown table) is a ``KeyError``, a
``ValueError`` (what Reverb raises from ``insert`` and ``create_item`` for an
unknown table) and a ``RuntimeError`` (what it raises from ``sample`` and
``mutate_priorities``), so each of those ``except`` clauses catches it. Bad
arguments raise ``ValueError`` (or ``KeyError`` for unknown keys) naming the
argument.

Example:
    >>> from resound import errors
    >>> issubclass(errors.DeadlineExceededError, errors.ReverbError)
    True
    >>> issubclass(errors.DeadlineExceededError, TimeoutError)
    True
    >>> all(issubclass(errors.NotFoundError, kind) for kind in (KeyError, ValueError, RuntimeError))
    True
"""

from __future__ import annotations

from resound._core import CancelledError, CheckpointError, DeadlineExceededError, ReverbError

__all__ = [
    "CancelledError",
    "CheckpointError",
    "DeadlineExceededError",
    "NotFoundError",
    "ResourceExhaustedError",
    "ReverbError",
]


class ResourceExhaustedError(ReverbError, RuntimeError):
    """A server's limit would be exceeded (its ``max_bytes`` of chunks); the
    message names the limit. Nothing of the refused request was stored."""


class NotFoundError(ReverbError, KeyError, RuntimeError, ValueError):
    """A named table (or other resource) does not exist.

    Reverb raises ValueError or RuntimeError for an unknown table depending on
    the call; this error is both (and a KeyError), so code written for either
    catches it.
    """

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""

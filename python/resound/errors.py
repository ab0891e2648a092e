"""Errors raised by resound, named as in Reverb.

``ReverbError`` is the base of resound's own errors;
``DeadlineExceededError`` is raised when a call reaches its timeout and
``CancelledError`` (also a ``RuntimeError``) when a table is closed while or
before the call runs. Bad arguments raise ``ValueError`` (or ``KeyError`` for
unknown keys) naming the argument.

Example:
    >>> from resound import errors
    >>> issubclass(errors.DeadlineExceededError, errors.ReverbError)
    True
"""

from __future__ import annotations

from resound._core import CancelledError, DeadlineExceededError, ReverbError

__all__ = ["CancelledError", "DeadlineExceededError", "ReverbError"]

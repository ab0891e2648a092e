"""Status codes and resound's exceptions, both ways, for both ends: what a
failed gRPC call means to a client (wait for the server, or raise the
exception of its status code: ``error_from_rpc``, ``means_unreachable``),
and which status a server's call ends with after an exception
(``status_of``). The two tables below agree, so that an error crosses the
wire as the same exception.

Example:
    >>> import grpc
    >>> class Refused(grpc.RpcError):
    ...     def code(self): return grpc.StatusCode.NOT_FOUND
    ...     def details(self): return "no table 'replay'"
    >>> error_from_rpc(Refused(), "Sample")
    NotFoundError("no table 'replay'")
"""

from __future__ import annotations

import grpc

from resound.errors import (
    CancelledError,
    DeadlineExceededError,
    NotFoundError,
    ResourceExhaustedError,
)

__all__ = ["TRANSIENT", "error_from_rpc", "means_unreachable", "status_of"]

# Status codes that mean "the connection or server went away": retried.
TRANSIENT = (grpc.StatusCode.UNAVAILABLE,)
# ...unless the server answered and refused the connection (TLS settings that
# do not match): waiting would not help, so that raises ConnectionError.
_REFUSED_CONNECTION = ("handshake", "certificate", "ssl_error", "verification", "unauthenticated")


def means_unreachable(error: grpc.RpcError) -> bool:
    """Whether ``error`` means the server is not there (yet): wait for it."""
    if error.code() not in TRANSIENT:
        return False
    # "tcp handshaker shutdown" is a TCP connect cut short (a server busy
    # accepting hundreds of connections at once), not a refusal: wait.
    details = (error.details() or "").lower().replace("tcp handshaker shutdown", "")
    return not any(refused in details for refused in _REFUSED_CONNECTION)


# The exception of each status code a client raises as such, and whether its
# message names the call (NOT_FOUND and UNIMPLEMENTED say it all themselves).
_EXCEPTIONS: dict[grpc.StatusCode, tuple[type[Exception], bool]] = {
    grpc.StatusCode.INVALID_ARGUMENT: (ValueError, True),
    grpc.StatusCode.NOT_FOUND: (NotFoundError, False),
    grpc.StatusCode.DEADLINE_EXCEEDED: (DeadlineExceededError, True),
    grpc.StatusCode.CANCELLED: (CancelledError, True),
    grpc.StatusCode.UNIMPLEMENTED: (NotImplementedError, False),
    grpc.StatusCode.UNAVAILABLE: (ConnectionError, True),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (ResourceExhaustedError, True),
}


def error_from_rpc(error: grpc.RpcError, what: str) -> Exception:
    """The resound exception for a failed call (status code -> exception type)."""
    code = error.code() if hasattr(error, "code") else None
    details = (error.details() if hasattr(error, "details") else None) or str(error)
    message = f"{what}: {details}"
    if code not in _EXCEPTIONS:
        return RuntimeError(f"{message} ({code})")
    exception, names_the_call = _EXCEPTIONS[code]
    if code == grpc.StatusCode.DEADLINE_EXCEEDED and details.startswith("table '"):
        # A rate limiter's timeout names its table and says why, in the
        # words an embedded table's timeout uses: the same text on both.
        names_the_call = False
    return exception(message if names_the_call else details)


def status_of(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status (code, message) a server's call ends with after ``error``
    (the exception its client then raises: see error_from_rpc).

    Example:
        >>> status_of(NotFoundError("no table 'replay'"))[0].name
        'NOT_FOUND'
    """
    if isinstance(error, NotFoundError):
        return grpc.StatusCode.NOT_FOUND, str(error)
    if isinstance(error, DeadlineExceededError):
        return grpc.StatusCode.DEADLINE_EXCEEDED, str(error)
    if isinstance(error, CancelledError):
        return grpc.StatusCode.CANCELLED, str(error)
    if isinstance(error, (ValueError, TypeError, OverflowError)):
        return grpc.StatusCode.INVALID_ARGUMENT, str(error)
    return grpc.StatusCode.INTERNAL, f"{type(error).__name__}: {error}"

"""What a failed gRPC call means to a client: wait for the server, or raise
the resound exception of its status code.

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

__all__ = ["TRANSIENT", "error_from_rpc", "means_unreachable"]

# Status codes that mean "the connection or server went away": retried.
TRANSIENT = (grpc.StatusCode.UNAVAILABLE,)
# ...unless the server answered and refused the connection (TLS settings that
# do not match): waiting would not help, so that raises ConnectionError.
_REFUSED_CONNECTION = ("handshake", "certificate", "ssl_error", "verification", "unauthenticated")


def means_unreachable(error: grpc.RpcError) -> bool:
    """Whether ``error`` means the server is not there (yet): wait for it."""
    if error.code() not in TRANSIENT:
        return False
    details = (error.details() or "").lower()
    return not any(refused in details for refused in _REFUSED_CONNECTION)


def error_from_rpc(error: grpc.RpcError, what: str) -> Exception:
    """The resound exception for a failed call (status code -> exception type)."""
    code = error.code() if hasattr(error, "code") else None
    details = (error.details() if hasattr(error, "details") else None) or str(error)
    message = f"{what}: {details}"
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return ValueError(message)
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFoundError(details)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceededError(message)
    if code == grpc.StatusCode.CANCELLED:
        return CancelledError(message)
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return NotImplementedError(details)
    if code == grpc.StatusCode.UNAVAILABLE:
        return ConnectionError(message)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ResourceExhaustedError(message)
    return RuntimeError(f"{message} ({code})")

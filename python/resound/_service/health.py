"""The standard gRPC health service (``grpc.health.v1.Health``) of a
listening server, as Kubernetes' ``grpc:`` probes and ``grpc_health_probe``
ask it.

Both the server as a whole (service ``""``) and the replay service
(``resound.v1.Replay``) are SERVING from the start until the server begins
to stop; from then on NOT_SERVING, before the tables close and the grace
period runs, so that load balancers stop sending new work while the calls
still open get their answers. The health calls are not replay calls: the
server's limits on open calls never refuse them.

The messages, the service's base class and its registration are
grpcio-health-checking's. The servicer is written here for the serving
loop: the package's asyncio servicer keeps its ``Watch`` calls open for
good, so a stopping server would wait its whole grace period for them and
then cut them off; here a watcher hears NOT_SERVING and its call ends.

Example (on the serving loop):
    >>> health = ServingHealth()  # doctest: +SKIP
    >>> health.serve_on(grpc_aio_server)  # doctest: +SKIP
    >>> health.stop_serving()  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from resound import _proto

__all__ = ["SERVICES", "ServingHealth"]

# The services whose health is reported: the server as a whole and the replay service.
SERVICES = ("", _proto.SERVICE)
_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class ServingHealth(health_pb2_grpc.HealthServicer):
    """The health of one grpc.aio server's services; used on its loop only."""

    def __init__(self) -> None:
        self._status = dict.fromkeys(SERVICES, _SERVING)
        self._stopped = False
        self._changed = asyncio.Event()  # set (and replaced) at each change

    def serve_on(self, server: Any) -> None:
        """Registers the health service on ``server`` (before it starts)."""
        health_pb2_grpc.add_HealthServicer_to_server(self, server)

    def stop_serving(self) -> None:
        """NOT_SERVING for every service, for good: watchers hear it at
        once, and their calls end. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._status = dict.fromkeys(SERVICES, _NOT_SERVING)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def Check(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        status = self._status.get(request.service)
        if status is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no service {request.service!r} here; known: {', '.join(map(repr, SERVICES))}",
            )
        return health_pb2.HealthCheckResponse(status=status)

    async def Watch(self, request: Any, context: grpc.aio.ServicerContext) -> None:  # noqa: N802
        sent = None
        while True:
            # Taken before the status is read: a change while the answer is
            # written sets this event, and the loop reads again at once.
            changed, stopped = self._changed, self._stopped
            status = self._status.get(request.service, _UNKNOWN)
            if status != sent:
                await context.write(health_pb2.HealthCheckResponse(status=status))
                sent = status
            if stopped:
                return  # the status read after the stop is final
            await changed.wait()

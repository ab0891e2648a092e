"""What a Client's address names: one server, or several.

One ``'host:port'`` is one server (gRPC may still resolve the host name; the
client treats whatever answers as one server). Several servers are named by

* a list of ``'host:port'`` strings, or one string of them joined by commas;
* a gRPC ``ipv4:`` / ``ipv6:`` target (``'ipv4:10.0.0.1:8000,10.0.0.2:8000'``,
  ``'ipv6:[::1]:8000,[::1]:8001'``);
* a gRPC ``dns:`` target (``'dns:///replay.ns.svc.cluster.local:8000'``):
  every address the name resolves to is a server (a Kubernetes headless
  service resolves to one address per pod). The name is resolved when the
  client is first used and again from time to time, so servers that come and
  go are followed.

Example:
    >>> parse_target('ipv4:127.0.0.1:1,127.0.0.1:2').addresses
    ['127.0.0.1:1', '127.0.0.1:2']
    >>> parse_target('localhost:8000').several
    False
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable, Sequence

__all__ = ["Target", "parse_target", "resolve_name"]

_EXPECTED = (
    "a 'host:port' str, a list of them, or a gRPC target naming several "
    "('ipv4:h1:p1,h2:p2', 'ipv6:[a1]:p1,[a2]:p2', 'dns:///name:port')"
)


# gRPC targets of one server that are not 'host:port' (gRPC's own schemes).
_ONE_SERVER_SCHEMES = ("unix:", "unix-abstract:", "vsock:")


@dataclasses.dataclass(frozen=True)
class Target:
    """A parsed client address.

    ``text`` is the address as one string (``Client.server_address``);
    ``addresses`` the servers' ``'host:port'`` when fixed, None for a ``dns:``
    target, whose ``dns_name`` (host, port) is resolved on use; ``several``
    whether the client spreads its work over servers (a list or a gRPC
    multi-address target, even if it names one server).
    """

    text: str
    addresses: list[str] | None
    dns_name: tuple[str, int] | None
    several: bool


def parse_target(target: str | Sequence[str]) -> Target:
    """The Target of a Client's ``server_address``; ValueError naming the
    argument and the accepted forms if it is none of them."""
    if isinstance(target, str):
        if not target:
            raise ValueError(f"server_address must be {_EXPECTED}, got ''")
        if target.startswith("dns:"):
            return Target(target, None, _dns_name(target), True)
        if target.startswith(("ipv4:", "ipv6:")):
            addresses = _split(target[5:], target)
            return Target(target, addresses, None, True)
        if "," in target:
            return Target(target, _split(target, target), None, True)
        if target.startswith(_ONE_SERVER_SCHEMES):
            return Target(target, [target], None, False)  # as gRPC reads it
        _check_host_port(target, target)  # 'localhost' alone would be port 443 to gRPC
        return Target(target, [target], None, False)
    if isinstance(target, Sequence) and not isinstance(target, bytes):
        addresses = list(target)
        if not addresses:
            raise ValueError(f"server_address must be {_EXPECTED}, got an empty list")
        for address in addresses:
            if not isinstance(address, str):
                raise TypeError(
                    f"server_address list entries must be 'host:port' str, got {address!r}"
                )
            if not address:
                raise ValueError(
                    f"server_address list entries must be nonempty 'host:port' str, got {address!r}"
                )
            if "," in address or address.startswith(("dns:", "ipv4:", "ipv6:")):
                raise ValueError(
                    f"server_address list entries must each be one 'host:port', got {address!r}"
                )
            _check_host_port(address, address)
        _check_distinct(addresses)
        return Target(",".join(addresses), addresses, None, True)
    raise TypeError(f"server_address must be {_EXPECTED}, got {type(target).__name__} {target!r}")


def resolve_name(
    host: str,
    port: int,
    getaddrinfo: Callable[..., list[tuple]] = socket.getaddrinfo,
) -> list[str]:
    """Every distinct address ``host`` resolves to, as ``'ip:port'``
    (``'[ip]:port'`` for IPv6), in the resolver's order. OSError (such as
    socket.gaierror) if it resolves to nothing."""
    found = []
    for family, _, _, _, sockaddr in getaddrinfo(host, port, type=socket.SOCK_STREAM):
        ip = sockaddr[0]
        address = f"[{ip}]:{port}" if family == socket.AF_INET6 else f"{ip}:{port}"
        if address not in found:
            found.append(address)
    if not found:
        raise OSError(f"{host!r} resolves to no address")
    return found


def _split(text: str, target: str) -> list[str]:
    addresses = [part.strip() for part in text.split(",")]
    for address in addresses:
        _check_host_port(address, target)
    _check_distinct(addresses)
    return addresses


def _dns_name(target: str) -> tuple[str, int]:
    # gRPC's forms: dns:name:port, dns:///name:port, dns://authority/name:port.
    rest = target[4:]
    if rest.startswith("//"):
        _, slash, rest = rest[2:].partition("/")
        if not slash:
            raise ValueError(f"server_address {target!r}: a dns: target is 'dns:///name:port'")
    return _check_host_port(rest, target)


def _check_host_port(address: str, target: str) -> tuple[str, int]:
    host, colon, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"server_address {target!r}: {address!r} is not 'host:port' (a port in 1-65535)"
        )
    return host, int(port)


def _check_distinct(addresses: list[str]) -> None:
    seen = set()
    for address in addresses:
        if address in seen:
            raise ValueError(f"server_address names {address!r} twice; name each server once")
        seen.add(address)

"""TLS for the gRPC service: ``ServerTls`` for a Server, ``ClientTls`` for a Client.

A server given ``tls=ServerTls(...)`` accepts only TLS connections with its
certificate; with ``client_ca`` it also requires each client to present a
certificate signed by that CA (mutual TLS). A client given
``tls=ClientTls(...)`` checks the server's certificate against
``root_certificates`` (the system's roots when None) and presents its own
certificate when given one. Certificates and keys are PEM bytes, or read from
files with ``from_files``. Clients of a server in their own process call it
directly, without a socket, and so without TLS.

Example:
    >>> server_tls = ServerTls.from_files('server.pem', 'server.key')  # doctest: +SKIP
    >>> server = resound.Server(tables, port=8000, host='0.0.0.0', tls=server_tls)  # doctest: +SKIP
    >>> client = resound.Client(  # doctest: +SKIP
    ...     'replay.example.com:8000', tls=ClientTls.from_files(root_certificates='ca.pem'))
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from resound._files import NotARegularFileError, read_regular_file

__all__ = ["ClientTls", "ServerTls"]

_PEM = b"-----BEGIN "


def _check_pem(settings: Any, argument: str, what: str) -> None:
    """Checks that field ``argument`` holds PEM text; stores it as bytes."""
    value = getattr(settings, argument)
    if isinstance(value, str):
        value = value.encode()
    problem = _pem_problem(value)
    if problem is not None:
        raise ValueError(
            f"{argument} must be PEM bytes ({what}, starting '-----BEGIN ...'), but {problem}; "
            "ServerTls.from_files / ClientTls.from_files read files"
        )
    object.__setattr__(settings, argument, value)  # the dataclass is frozen


def _pem_problem(value: Any) -> str | None:
    """What keeps ``value`` from being PEM text, or None if it is PEM. Told
    by its type and size only, never its contents: it may be a private key
    (in another format, or the wrong file), and errors end up in logs."""
    if not isinstance(value, bytes):
        return f"it is {type(value).__name__}, not bytes or str"
    if _PEM in value:
        return None
    if not value:
        return "it is empty"
    if value[:1] == b"\x30":  # an ASN.1 SEQUENCE: DER, PEM's binary form
        return (
            f"its {len(value)} bytes look like DER (binary), not PEM text (convert them with "
            "openssl, e.g. 'openssl x509 -inform der' or 'openssl pkey -inform der')"
        )
    return f"its {len(value)} bytes hold no '-----BEGIN' line"


def _read(path: Any, argument: str, what: str) -> bytes:
    """The PEM contents of file ``path``, given as ``argument``; ValueError
    naming both and what is wrong (never the contents)."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{argument} must be a file path, got {path!r}")
    try:
        data = read_regular_file(path)  # a FIFO or a device would hang the server's start
    except OSError as error:
        raise ValueError(f"{argument}: cannot read {os.fspath(path)!r}: {error.strerror}") from None
    except NotARegularFileError as error:
        raise ValueError(f"{argument}: {error}") from None
    problem = _pem_problem(data)
    if problem is not None:
        raise ValueError(
            f"{argument}: {os.fspath(path)!r} is not a PEM file ({what}, starting "
            f"'-----BEGIN ...'): {problem}"
        )
    return data


@dataclasses.dataclass(frozen=True, repr=False)
class ServerTls:
    """A server's TLS settings.

    Args:
      certificate_chain: the server's certificate (PEM), then any
        intermediates. Clients check it against the name they connect to.
      private_key: its private key (PEM).
      client_ca: None, or the CA certificate(s) (PEM) that must have signed
        every client's certificate: clients without one are refused.
    """

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None

    def __post_init__(self) -> None:
        _check_pem(self, "certificate_chain", "a certificate")
        _check_pem(self, "private_key", "a private key")
        if self.client_ca is not None:
            _check_pem(self, "client_ca", "CA certificates")

    @classmethod
    def from_files(
        cls,
        certificate_chain: str | os.PathLike[str],
        private_key: str | os.PathLike[str],
        client_ca: str | os.PathLike[str] | None = None,
    ) -> ServerTls:
        """ServerTls from PEM files."""
        return cls(
            _read(certificate_chain, "certificate_chain", "a certificate"),
            _read(private_key, "private_key", "a private key"),
            None if client_ca is None else _read(client_ca, "client_ca", "CA certificates"),
        )

    def credentials(self) -> Any:
        """The grpc.ServerCredentials."""
        import grpc

        return grpc.ssl_server_credentials(
            [(self.private_key, self.certificate_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )

    def __repr__(self) -> str:  # never the key
        return f"ServerTls(client certificates required: {self.client_ca is not None})"


@dataclasses.dataclass(frozen=True, repr=False)
class ClientTls:
    """A client's TLS settings.

    Args:
      root_certificates: the CA certificate(s) (PEM) the server's certificate
        must chain to; None: the system's trusted roots.
      certificate_chain: the client's certificate (PEM), for servers that
        require one; give ``private_key`` with it.
      private_key: the client certificate's private key (PEM).
      server_name: the name the server's certificate must carry, when it
        differs from the host the client connects to (such as an IP address
        of a server whose certificate names its DNS name).

    A pickled Client carries its ClientTls, private key included.
    """

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if self.root_certificates is not None:
            _check_pem(self, "root_certificates", "CA certificates")
        if (self.certificate_chain is None) != (self.private_key is None):
            raise ValueError(
                "certificate_chain and private_key go together: give both (a client "
                "certificate) or neither"
            )
        if self.certificate_chain is not None:
            _check_pem(self, "certificate_chain", "a certificate")
            _check_pem(self, "private_key", "a private key")
        if self.server_name is not None and (
            not isinstance(self.server_name, str) or not self.server_name
        ):
            raise ValueError(
                f"server_name must be a nonempty str or None, got {self.server_name!r}"
            )

    @classmethod
    def from_files(
        cls,
        root_certificates: str | os.PathLike[str] | None = None,
        certificate_chain: str | os.PathLike[str] | None = None,
        private_key: str | os.PathLike[str] | None = None,
        server_name: str | None = None,
    ) -> ClientTls:
        """ClientTls from PEM files (None: not given)."""

        def read(path: Any, argument: str, what: str) -> bytes | None:
            return None if path is None else _read(path, argument, what)

        return cls(
            read(root_certificates, "root_certificates", "CA certificates"),
            read(certificate_chain, "certificate_chain", "a certificate"),
            read(private_key, "private_key", "a private key"),
            server_name,
        )

    def credentials(self) -> Any:
        """The grpc.ChannelCredentials."""
        import grpc

        return grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )

    def channel_options(self) -> list[tuple[str, Any]]:
        if self.server_name is None:
            return []
        return [("grpc.ssl_target_name_override", self.server_name)]

    def __repr__(self) -> str:  # never the key
        return (
            f"ClientTls(custom roots: {self.root_certificates is not None}, "
            f"client certificate: {self.certificate_chain is not None}, "
            f"server_name={self.server_name!r})"
        )

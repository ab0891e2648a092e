"""TLS: a server with a certificate accepts only clients that trust it (and,
with ``client_ca``, only clients with a certificate signed by that CA); over
TLS every call works as in plaintext. The certificates are made here, for
127.0.0.1 and localhost, by a CA made here."""

from __future__ import annotations

import datetime
import ipaddress
import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import resound
from resound.tls import ClientTls, ServerTls

from helpers.server_processes import ServerProcess, refused_start
from helpers.waiting import SAFETY


@dataclass
class Issued:
    certificate: bytes  # PEM
    key: bytes  # PEM


# A server refusing a client's TLS: the client raises ConnectionError at once
# when it sees the TLS error, or, when the server only drops the connection
# (as a server going away would; e.g. a missing client certificate under
# TLS 1.3), it waits for the server and raises DeadlineExceededError.
REFUSED = (ConnectionError, resound.DeadlineExceededError)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class Authority:
    """A self-signed CA that issues server and client certificates."""

    def __init__(self, name: str) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self._certificate = (
            self._builder(self._name, self._key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.certificate = self._certificate.public_bytes(serialization.Encoding.PEM)

    def _builder(self, subject: x509.Name, public_key: object) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.timezone.utc)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._name)
            .public_key(public_key)  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )

    def issue(self, name: str, *, server: bool) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = self._builder(subject, key.public_key()).add_extension(
            x509.BasicConstraints(ca=False, path_length=None), critical=True
        )
        if server:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            usage = ExtendedKeyUsageOID.SERVER_AUTH
        else:
            usage = ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        return Issued(certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key))


@dataclass
class Pki:
    ca: Authority
    server: Issued
    client: Issued
    stranger_ca: Authority  # another CA, that the server does not trust
    stranger: Issued  # a client certificate from it


@pytest.fixture(scope="module")
def pki() -> Pki:
    ca, stranger_ca = Authority("resound test CA"), Authority("some other CA")
    return Pki(
        ca,
        ca.issue("resound server", server=True),
        ca.issue("a learner", server=False),
        stranger_ca,
        stranger_ca.issue("a stranger", server=False),
    )


def queue_table() -> resound.Table:
    return resound.Table.queue("q", max_size=100)


@pytest.fixture
def tls_server(pki: Pki) -> Iterator[resound.Server]:
    server = resound.Server([queue_table()], tls=ServerTls(pki.server.certificate, pki.server.key))
    yield server
    server.stop()


@pytest.fixture
def mutual_server(pki: Pki) -> Iterator[resound.Server]:
    tls = ServerTls(pki.server.certificate, pki.server.key, client_ca=pki.ca.certificate)
    server = resound.Server([queue_table()], tls=tls)
    yield server
    server.stop()


def round_trip(client: resound.Client) -> None:
    """A writer's items, a client insert and samples, over the client's transport."""
    with client.trajectory_writer(1) as writer:
        for value in range(3):
            writer.append([np.float32(value)])
            writer.create_item("q", 1.0, [writer.history[0][-1:]])
    client.insert([np.float32(3.0)], priorities={"q": 1.0})
    batch = client.sample_batch("q", 4, timeout=SAFETY)
    assert sorted(batch.data[0][:, 0].tolist()) == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_client_trusting_the_ca_works_over_tls(pki, tls_server, host) -> None:
    client = resound.Client(
        f"{host}:{tls_server.port}", transport="grpc", tls=ClientTls(pki.ca.certificate)
    )
    round_trip(client)
    assert client.server_info()["q"].current_size == 0
    # A pickled copy keeps its TLS settings.
    copy = pickle.loads(pickle.dumps(client))
    assert copy.server_info()["q"].max_size == 100


def test_plaintext_and_untrusting_clients_are_refused(pki, tls_server) -> None:
    address = f"127.0.0.1:{tls_server.port}"
    # The server drops a plaintext connection, as one that is going away
    # would: the client waits for it, up to its timeout.
    with pytest.raises(resound.DeadlineExceededError, match="Socket closed"):
        resound.Client(address, transport="grpc").server_info(timeout=0.5)
    untrusting = resound.Client(
        address, transport="grpc", tls=ClientTls(pki.stranger_ca.certificate)
    )
    with pytest.raises(ConnectionError):
        untrusting.server_info(timeout=SAFETY)
    with pytest.raises(ConnectionError):
        untrusting.sample_batch("q", 1, timeout=1.0)
    # The refused clients left nothing behind; a trusting one still works.
    round_trip(resound.Client(address, transport="grpc", tls=ClientTls(pki.ca.certificate)))


def test_a_name_other_than_the_address_is_checked_with_server_name(pki, tls_server) -> None:
    # The certificate names localhost and 127.0.0.1, not "replay.example".
    address = f"127.0.0.1:{tls_server.port}"
    wrong = ClientTls(pki.ca.certificate, server_name="replay.example")
    with pytest.raises(ConnectionError):
        resound.Client(address, transport="grpc", tls=wrong).server_info(timeout=SAFETY)
    right = ClientTls(pki.ca.certificate, server_name="localhost")
    round_trip(resound.Client(address, transport="grpc", tls=right))


def test_client_certificates_are_required_when_the_server_has_a_client_ca(
    pki, mutual_server
) -> None:
    address = f"127.0.0.1:{mutual_server.port}"
    anonymous = ClientTls(pki.ca.certificate)
    with pytest.raises(REFUSED):
        resound.Client(address, transport="grpc", tls=anonymous).server_info(timeout=0.5)
    stranger = ClientTls(pki.ca.certificate, pki.stranger.certificate, pki.stranger.key)
    with pytest.raises(REFUSED):
        resound.Client(address, transport="grpc", tls=stranger).server_info(timeout=0.5)
    member = ClientTls(pki.ca.certificate, pki.client.certificate, pki.client.key)
    round_trip(resound.Client(address, transport="grpc", tls=member))


def test_a_client_of_several_tls_servers(pki) -> None:
    servers = [
        resound.Server([queue_table()], tls=ServerTls(pki.server.certificate, pki.server.key))
        for _ in range(2)
    ]
    try:
        client = resound.Client(
            [f"127.0.0.1:{s.port}" for s in servers],
            transport="grpc",
            tls=ClientTls(pki.ca.certificate),
        )
        for value in range(4):
            client.insert([np.float32(value)], priorities={"q": 1.0})
        assert [s.table("q").info.current_size for s in servers] == [2, 2]
        assert len(client.sample_batch("q", 4, timeout=SAFETY).info.key) == 4
    finally:
        for server in servers:
            server.stop()


# --- settings and their errors


def test_settings_read_from_files_and_never_show_keys(pki, tmp_path: Path) -> None:
    (tmp_path / "server.pem").write_bytes(pki.server.certificate)
    (tmp_path / "server.key").write_bytes(pki.server.key)
    (tmp_path / "ca.pem").write_bytes(pki.ca.certificate)
    server_tls = ServerTls.from_files(
        tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "ca.pem"
    )
    assert server_tls.client_ca == pki.ca.certificate
    assert "PRIVATE" not in repr(server_tls)
    client_tls = ClientTls.from_files(tmp_path / "ca.pem", server_name="localhost")
    assert client_tls.root_certificates == pki.ca.certificate
    assert ServerTls(pki.server.certificate.decode(), pki.server.key.decode()) == ServerTls(
        pki.server.certificate, pki.server.key
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: ServerTls(b"not a certificate", p.server.key), "certificate_chain must be PEM"),
        (lambda p: ServerTls(p.server.certificate, 42), "private_key must be PEM"),
        (lambda p: ServerTls(p.server.certificate, p.server.key, b"x"), "client_ca must be PEM"),
        (lambda p: ClientTls(b"x"), "root_certificates must be PEM"),
        (lambda p: ClientTls(None, p.client.certificate), "go together"),
        (lambda p: ClientTls(server_name=""), "server_name must be"),
        (lambda p: ServerTls.from_files("/nonexistent.pem", "/x.key"), "cannot read"),
        (
            lambda p: ServerTls.from_files("/dev/null", "/x.key"),
            "certificate_chain: /dev/null is a character device, not a regular file",
        ),
        (lambda p: ClientTls.from_files(123), "must be a file path"),
    ],
)
def test_bad_settings_are_refused_naming_the_argument(pki, make, message) -> None:
    with pytest.raises(ValueError, match=message):
        make(pki)


def test_servers_and_clients_take_only_tls_settings(pki) -> None:
    with pytest.raises(ValueError, match="tls must be a resound.tls.ServerTls"):
        resound.Server([queue_table()], tls=ClientTls())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="embedded mode has no socket"):
        resound.Server(
            [queue_table()], listen=False, tls=ServerTls(pki.server.certificate, pki.server.key)
        )
    with pytest.raises(ValueError, match="tls must be a resound.tls.ClientTls"):
        resound.Client("localhost:1", tls=pki.ca.certificate)  # type: ignore[arg-type]


def test_a_key_that_does_not_match_the_certificate_is_refused(pki) -> None:
    with pytest.raises(ValueError, match="cannot serve.*do not match"):
        resound.Server([queue_table()], tls=ServerTls(pki.server.certificate, pki.client.key))


# --- the server command


def write_files(pki: Pki, directory: Path) -> dict[str, Path]:
    files = {
        "cert": (directory / "server.pem", pki.server.certificate),
        "key": (directory / "server.key", pki.server.key),
        "ca": (directory / "ca.pem", pki.ca.certificate),
    }
    for path, content in files.values():
        path.write_bytes(content)
    return {name: path for name, (path, _) in files.items()}


def test_the_server_command_serves_tls_with_client_certificates(pki, tmp_path) -> None:
    files = write_files(pki, tmp_path)
    config = tmp_path / "server.toml"
    config.write_text('[[tables]]\nname = "q"\nkind = "queue"\nmax_size = 10\n')
    served = ServerProcess(
        config,
        "--tls-cert", str(files["cert"]), "--tls-key", str(files["key"]),
        "--tls-client-ca", str(files["ca"]),
    )  # fmt: skip
    try:
        match = served.wait_for(r"serving 1 table\(s\) on 127\.0\.0\.1:(\d+) \((.*)\)")
        assert "client certificates required: True" in match.group(2)
        address = f"127.0.0.1:{match.group(1)}"
        with pytest.raises(REFUSED):
            resound.Client(address, tls=ClientTls(pki.ca.certificate)).server_info(0.5)
        tls = ClientTls(pki.ca.certificate, pki.client.certificate, pki.client.key)
        client = resound.Client(address, tls=tls)
        client.insert([np.float32(1.0)], priorities={"q": 1.0})
        assert client.server_info()["q"].current_size == 1
    finally:
        assert served.stop() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tls-cert", "{cert}"], "go together"),
        (["--tls-client-ca", "{ca}"], "needs --tls-cert"),
        (["--tls-cert", "{cert}", "--tls-key", "/nonexistent.key"], "cannot read"),
    ],
)
def test_the_server_command_refuses_incomplete_tls_options(pki, tmp_path, args, message) -> None:
    files = write_files(pki, tmp_path)
    config = tmp_path / "server.toml"
    config.write_text('[[tables]]\nname = "q"\nkind = "queue"\nmax_size = 10\n')
    filled = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    assert message in refused_start("--config", str(config), *filled)


def test_a_tls_file_that_is_a_fifo_is_refused_naming_it(pki, tmp_path: Path) -> None:
    # Its open waited for a writer: the server hung at start (refused_start
    # times out after SAFETY seconds).
    files = write_files(pki, tmp_path)
    fifo = tmp_path / "fifo.key"
    os.mkfifo(fifo)
    config = tmp_path / "server.toml"
    config.write_text('[[tables]]\nname = "q"\nkind = "queue"\nmax_size = 10\n')
    message = refused_start("--config", str(config), "--tls-cert", str(files["cert"]),
                            "--tls-key", str(fifo))  # fmt: skip
    assert f"private_key: {fifo} is a FIFO, not a regular file" in message


def test_a_tls_file_that_is_not_pem_is_named_and_its_contents_never_shown(
    pki, tmp_path: Path
) -> None:
    # The wrong file may hold a secret (a key in another format): it used to
    # be quoted in the error, which ends up in logs.
    files = write_files(pki, tmp_path)
    secret = b"SECRET-KEY-MATERIAL-0123456789"
    (tmp_path / "wrong.pem").write_bytes(secret)
    (tmp_path / "key.der").write_bytes(b"\x30\x82" + secret)
    config = tmp_path / "server.toml"
    config.write_text('[[tables]]\nname = "q"\nkind = "queue"\nmax_size = 10\n')
    message = refused_start("--config", str(config), "--tls-cert", str(tmp_path / "wrong.pem"),
                            "--tls-key", str(files["key"]))  # fmt: skip
    assert f"certificate_chain: '{tmp_path / 'wrong.pem'}' is not a PEM file" in message
    assert "its 30 bytes hold no '-----BEGIN' line" in message
    with pytest.raises(ValueError) as der:
        ServerTls.from_files(files["cert"], tmp_path / "key.der")
    assert f"private_key: '{tmp_path / 'key.der'}' is not a PEM file" in str(der.value)
    assert "look like DER" in str(der.value)
    with pytest.raises(ValueError) as given:
        ClientTls(secret)  # given as bytes: described, not quoted, too
    assert "its 30 bytes hold no '-----BEGIN' line" in str(given.value)
    for error in (message, str(der.value), str(given.value)):
        assert "SECRET" not in error and "0123" not in error


@pytest.mark.slow
def test_the_server_command_takes_tls_files_from_its_config(pki, tmp_path) -> None:
    files = write_files(pki, tmp_path)
    config = tmp_path / "server.toml"
    config.write_text(
        f'[server]\ntls_cert = "{files["cert"]}"\ntls_key = "{files["key"]}"\n\n'
        '[[tables]]\nname = "q"\nkind = "queue"\nmax_size = 10\n'
    )
    served = ServerProcess(config)
    try:
        match = served.wait_for(r"serving 1 table\(s\) on 127\.0\.0\.1:(\d+) \((.*)\)")
        assert "client certificates required: False" in match.group(2)
        address = f"127.0.0.1:{match.group(1)}"
        with pytest.raises(resound.DeadlineExceededError, match="Socket closed"):
            resound.Client(address).server_info(0.5)  # plaintext: dropped, as above
        assert resound.Client(address, tls=ClientTls(pki.ca.certificate)).server_info()["q"]
    finally:
        assert served.stop() == 0

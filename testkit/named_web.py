"""Many host names on a few loopback addresses: name-based virtual hosting, for
tests and benchmarks of politeness per server (docs/frontier.md).

One threaded server listens on one port of each of its addresses and answers
for every name it was given, by the request's ``Host`` header, so ``a.test``
and ``b.test`` are two sites of one machine (the crawl maps the names to the
addresses with ``CRAWL_HOST_ADDRESSES``: :meth:`NamedWeb.host_addresses`).
With ``tls`` (a certificate and key, e.g. testkit/redis_tls.py's, made at test
time) the same port also speaks HTTPS: a connection whose first byte opens a
TLS handshake is wrapped, so ``http://a.test:P/`` and ``https://a.test:P/`` are
one server, as ports 80 and 443 of one host are.

Site ``name`` has pages ``/`` and ``/p/1`` .. ``/p/(pages-1)``; page k links to
page k+1 and to ``/`` (with ``mixed_schemes``, page k+1's link is absolute, in
https for odd k, in http for even k). ``/robots.txt`` answers 404 (allow all).
Each request is answered after ``latency`` seconds and logged: the name it
was for, its scheme, path, the address it came in on, and when it started
(request line read) and ended (just before the response is written), wall
clock, so :func:`peak_in_flight` and :func:`min_start_gap` judge politeness
from the server's side.
"""

from __future__ import annotations

import contextlib
import random
import socket
import socketserver
import ssl
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from testkit.testweb import bind_sockets

TLS_HANDSHAKE = 0x16


@dataclass(frozen=True)
class Hit:
    """One request as the server saw it."""

    name: str  # the Host header's name, lowercase, without the port
    scheme: str  # http | https
    path: str
    address: str  # the server address the connection came in on
    start: float
    end: float
    status: int


class NamedWeb:
    """``sites``: name -> page count; names are spread over ``addresses`` in
    order (name i on address i % len(addresses))."""

    __test__ = False

    def __init__(
        self,
        sites: dict[str, int],
        addresses: Sequence[str] = ("127.0.9.1",),
        latency: tuple[float, float] = (0.05, 0.05),
        tls: tuple[Path, Path] | None = None,
        mixed_schemes: bool = False,
        seed: int = 1,
    ) -> None:
        self.sites = {name.lower(): pages for name, pages in sites.items()}
        self.addresses = list(addresses)
        self.latency = latency
        self.mixed_schemes = mixed_schemes
        self.port = 0
        self.log: list[Hit] = []
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._context: ssl.SSLContext | None = None
        if tls is not None:
            self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._context.load_cert_chain(str(tls[0]), str(tls[1]))
        self._servers: list[socketserver.ThreadingTCPServer] = []
        self._threads: list[threading.Thread] = []

    # -- the web ---------------------------------------------------------------------

    def address_of(self, name: str) -> str:
        return self.addresses[list(self.sites).index(name) % len(self.addresses)]

    def host_addresses(self) -> dict[str, str]:
        """CRAWL_HOST_ADDRESSES for the crawl: every name on its address."""
        return {name: self.address_of(name) for name in self.sites}

    def url(self, name: str, k: int = 0, scheme: str = "http") -> str:
        return f"{scheme}://{name}:{self.port}{'/' if k == 0 else f'/p/{k}'}"

    def seeds(self, scheme: str = "http") -> list[str]:
        return [self.url(name, 0, scheme) for name in self.sites]

    def expected_pages(self) -> set[tuple[str, str]]:
        """(name, path) of every page, whatever its scheme."""
        return {
            (name, "/" if k == 0 else f"/p/{k}")
            for name, pages in self.sites.items()
            for k in range(pages)
        }

    def _page(self, name: str, k: int) -> bytes:
        links = ['<a href="/">home</a>']
        if k + 1 < self.sites[name]:
            if self.mixed_schemes:
                href = self.url(name, k + 1, "https" if k % 2 else "http")
                links.append(f'<a href="{href}">next</a>')
            else:
                links.append(f'<a href="/p/{k + 1}">next</a>')
        body = f"<html><head><title>{name} page {k}</title></head><body><h1>{name} page {k}</h1>"
        return (body + " ".join(links) + "</body></html>").encode()

    def _route(self, name: str, path: str) -> tuple[int, bytes]:
        pages = self.sites.get(name)
        if pages is None or path == "/robots.txt":
            return 404, b"not found\n"
        k = -1
        if path == "/":
            k = 0
        elif path.startswith("/p/") and path[3:].isdigit():
            k = int(path[3:])
        if not 0 <= k < pages:
            return 404, b"not found\n"
        return 200, self._page(name, k)

    # -- serving ---------------------------------------------------------------------

    def _handle(self, sock: socket.socket, address: str) -> None:
        scheme = "http"
        if self._context is not None:
            first = sock.recv(1, socket.MSG_PEEK)
            if first and first[0] == TLS_HANDSHAKE:
                sock = self._context.wrap_socket(sock, server_side=True)
                scheme = "https"
        reader = sock.makefile("rb")
        try:
            while line := reader.readline():
                start = time.time()
                parts = line.decode("latin-1").split()
                headers: dict[str, str] = {}
                while (raw := reader.readline()) not in (b"\r\n", b"\n", b""):
                    key, _, value = raw.decode("latin-1").partition(":")
                    headers[key.strip().lower()] = value.strip()
                if len(parts) != 3:
                    break
                length = int(headers.get("content-length", "0") or 0)
                if length:
                    reader.read(length)
                lo, hi = self.latency
                with self._lock:
                    pause = self._rng.uniform(lo, hi)
                time.sleep(pause)
                name = headers.get("host", "").rsplit(":", 1)[0].lower()
                path = parts[1].split("?", 1)[0]
                status, body = self._route(name, path)
                end = time.time()
                with self._lock:
                    self.log.append(Hit(name, scheme, path, address, start, end, status))
                head = (
                    f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\n"
                    f"Content-Type: text/html; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
                    "Connection: keep-alive\r\n\r\n"
                ).encode("latin-1")
                sock.sendall(head + (b"" if parts[0] == "HEAD" else body))
        except (OSError, ValueError):
            pass  # the client went away
        finally:
            reader.close()
            sock.close()

    def start(self) -> NamedWeb:
        self.port, socks = bind_sockets(self.addresses, self.port or None)
        web = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                web._handle(self.request, self.request.getsockname()[0])

        for sock in socks:
            sock.setblocking(True)
            server = socketserver.ThreadingTCPServer(
                sock.getsockname(), Handler, bind_and_activate=False
            )
            server.socket.close()
            server.socket = sock
            server.daemon_threads = True
            self._servers.append(server)
            thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(10)
        self._servers, self._threads = [], []

    def __enter__(self) -> NamedWeb:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def named_webs() -> Iterator[Callable[..., NamedWeb]]:
    """``make(sites, addresses, ...)``: started webs, stopped on exit (a fixture's body)."""
    webs: list[NamedWeb] = []

    def make(*args: Any, **kwargs: Any) -> NamedWeb:
        webs.append(NamedWeb(*args, **kwargs).start())
        return webs[-1]

    try:
        yield make
    finally:
        for web in webs:
            web.stop()


# -- judging from the log ------------------------------------------------------------


def peak_in_flight(hits: Iterable[Hit], key: Callable[[Hit], str]) -> dict[str, int]:
    """Per ``key`` (e.g. the address, or the name): most requests in flight at once."""
    events: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for hit in hits:
        events[key(hit)] += [(hit.start, 1), (hit.end, -1)]
    peaks = {}
    for k, evs in events.items():
        # Ends before starts at the same instant: touching intervals do not overlap.
        now = peak = 0
        for _, step in sorted(evs):
            now += step
            peak = max(peak, now)
        peaks[k] = peak
    return peaks


def min_start_gap(hits: Iterable[Hit], key: Callable[[Hit], str]) -> dict[str, float]:
    """Per ``key``: the shortest time between two starts."""
    starts: dict[str, list[float]] = defaultdict(list)
    for hit in hits:
        starts[key(hit)].append(hit.start)
    return {
        k: min((b - a for a, b in pairwise(sorted(v))), default=float("inf"))
        for k, v in starts.items()
    }


def min_idle(hits: Iterable[Hit], key: Callable[[Hit], str]) -> dict[str, float]:
    """Per ``key``: the shortest time from the end of the fetches before a
    start to that start (CRAWL_HOST_DELAY runs from the response)."""
    by_key: dict[str, list[Hit]] = defaultdict(list)
    for hit in hits:
        by_key[key(hit)].append(hit)
    out = {}
    for k, group in by_key.items():
        group.sort(key=lambda h: h.start)
        last_end, idle = group[0].end, float("inf")
        for hit in group[1:]:
            idle = min(idle, hit.start - last_end)
            last_end = max(last_end, hit.end)
        out[k] = idle
    return out

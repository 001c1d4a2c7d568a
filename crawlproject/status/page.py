"""``crawlproject status --serve [ADDRESS:]PORT``: the fleet's status as a live web page.

A read-only page (``page.html`` beside this module: inline CSS and script, no
external asset, so it works on a machine without internet) showing the figures
of ``crawlproject status`` (the same dict as ``--json``), pages/s over the last
hour as a chart, the busiest and the failing hosts and the workers alive. It
polls ``/status.json`` of the same server every few seconds.

The server is the standard library's (a thread per request, in one daemon
thread beside the command's asyncio loop, which owns the Redis connection:
requests hand ``collect_status`` to it and wait). Only ``GET /`` and ``GET
/status.json`` are answered (anything else: 404, other methods: 405). It binds
127.0.0.1 unless told otherwise; another address is logged as a WARNING (no
authentication: anyone who reaches it sees the crawl's figures and host
names). Bound to loopback it answers only requests naming a loopback host, so
a web page in the operator's browser cannot read it through DNS rebinding.
One Redis read serves every request within ``CACHE_SECONDS``, however many
browsers poll.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

DEFAULT_ADDRESS = "127.0.0.1"
REFRESH_SECONDS = 3.0  # the page's poll period (``--watch`` sets it)
CACHE_SECONDS = 1.0
COLLECT_TIMEOUT_SECONDS = 15.0
LOOPBACK_NAMES = ("localhost",)
# The page can only talk to its own server: even a script injected through a
# host name could load nothing from elsewhere.
CSP = (
    "default-src 'none'; connect-src 'self'; img-src 'self' data:; "
    "style-src 'unsafe-inline'; script-src 'unsafe-inline'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)

Collect = Callable[[], Coroutine[Any, Any, dict[str, Any]]]


def parse_listen(value: str) -> tuple[str, int]:
    """``PORT``, ``ADDRESS:PORT`` or ``[IPv6]:PORT`` -> (address, port); ValueError if bad."""
    address, sep, port_text = value.rpartition(":")
    if not sep:
        address = DEFAULT_ADDRESS
    address = address.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--serve wants [ADDRESS:]PORT, not {value!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"--serve: port {port} is not a TCP port (0-65535)")
    if not address:
        raise ValueError(f"--serve wants [ADDRESS:]PORT, not {value!r}")
    return address, port


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def page_html(refresh_seconds: float) -> bytes:
    """The page, its poll period filled in (read as package data: eggs and
    wheels carry it, crawlproject/status is a regular package)."""
    text = resources.files("crawlproject.status").joinpath("page.html").read_text("utf-8")
    return text.replace("{{REFRESH_MS}}", str(round(refresh_seconds * 1000))).encode("utf-8")


class StatusServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        collect: Collect,
        loop: asyncio.AbstractEventLoop,
        refresh_seconds: float,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, StatusHandler)
        self.collect = collect
        self.loop = loop
        self.html = page_html(refresh_seconds)
        self.loopback_only = is_loopback(address[0])
        self._lock = threading.Lock()
        self._cached: tuple[float, int, bytes] = (-CACHE_SECONDS, 0, b"")
        self._failing = False

    def host_allowed(self, host_header: str | None) -> bool:
        """Bound to loopback: only requests naming a loopback host (DNS rebinding)."""
        if not self.loopback_only:
            return True
        if not host_header:
            return False
        host = urlsplit("//" + host_header).hostname or ""
        return is_loopback(host)

    def status_json(self) -> tuple[int, bytes]:
        """(HTTP status, body): the status, at most ``CACHE_SECONDS`` old."""
        with self._lock:
            at, code, body = self._cached
            if time.monotonic() - at < CACHE_SECONDS:
                return code, body
            future = asyncio.run_coroutine_threadsafe(self.collect(), self.loop)
            try:
                status = future.result(COLLECT_TIMEOUT_SECONDS)
                code, body = 200, json.dumps(status, sort_keys=True).encode("utf-8")
                if self._failing:
                    logger.info("Status page: the crawl's Redis answers again")
            except (RedisError, OSError, TimeoutError) as exc:
                future.cancel()
                if not self._failing:  # once per outage, not once per poll
                    logger.warning("Status page: cannot read the crawl's Redis: %s", exc)
                code = 503
                body = json.dumps({"error": f"cannot read the crawl's Redis: {exc}"}).encode()
            self._failing = code != 200
            self._cached = (time.monotonic(), code, body)
            return code, body


class StatusHandler(BaseHTTPRequestHandler):
    server: StatusServer
    server_version = "crawlproject-status"
    sys_version = ""

    def do_GET(self) -> None:
        if not self.server.host_allowed(self.headers.get("Host")):
            self._send(403, "text/plain; charset=utf-8", b"host not allowed\n")
            return
        path = urlsplit(self.path).path
        if path == "/":
            self._send(200, "text/html; charset=utf-8", self.server.html)
        elif path == "/status.json":
            code, body = self.server.status_json()
            self._send(code, "application/json", body)
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")

    def _not_allowed(self) -> None:
        self._send(405, "text/plain; charset=utf-8", b"read-only: GET only\n", allow=True)

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed
    do_OPTIONS = do_TRACE = do_CONNECT = _not_allowed

    def _send(self, code: int, content_type: str, body: bytes, allow: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        if allow:
            self.send_header("Allow", "GET")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)


async def serve_page(collect: Collect, address: str, port: int, refresh_seconds: float) -> None:
    """Serves the page until SIGINT or SIGTERM."""
    loop = asyncio.get_running_loop()
    server = StatusServer((address, port), collect, loop, refresh_seconds)
    bound = server.server_address[1]
    if not server.loopback_only:
        logger.warning(
            "Status page bound to %s: anyone who can reach port %d sees the crawl's "
            "figures and host names (no authentication); the default is 127.0.0.1",
            address,
            bound,
        )
    thread = threading.Thread(target=server.serve_forever, name="status-page", daemon=True)
    thread.start()
    shown = f"[{address}]" if ":" in address else address
    print(f"crawlproject: status page on http://{shown}:{bound}/ (Ctrl-C stops it)", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        # shutdown() waits for serve_forever: off the loop, which requests may still need.
        await loop.run_in_executor(None, server.shutdown)
        server.server_close()

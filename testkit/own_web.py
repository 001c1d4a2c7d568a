"""The server of testkit/own_sites.py's sites: each site on its own loopback
address, all on one port, from a background thread.

Every host answers ``/robots.txt`` (allow all), its site's pages, and 404 for
any other path. Every request is logged as ``testkit.testweb.RequestRecord``
(so ``page_counts``, ``fetch_counts``, ``politeness_report`` and, from
``write_log``'s file, ``load_log`` read it), and the requests in flight are
counted live per host: a request is in flight from its request line until its
answer is handed to the socket; ``peak_in_flight[ip]`` is the most at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import socket
import threading
import time
from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path

from testkit.own_sites import Site
from testkit.testweb import REASONS, Reply, RequestRecord, bind_sockets

ROBOTS_TXT = "User-agent: *\nAllow: /\n"


class OwnSitesWeb:
    """Serves ``sites`` (IP -> site) on one port from a background thread."""

    def __init__(self, sites: dict[str, Site], latency: float = 0.0) -> None:
        self.sites = sites
        self.latency = latency  # seconds before each answer (the in-flight test's)
        self.port = 0
        self.log: list[RequestRecord] = []
        self.in_flight: Counter[str] = Counter()
        self.peak_in_flight: defaultdict[str, int] = defaultdict(int)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[object]] = set()

    def base_url(self, ip: str) -> str:
        return f"http://{ip}:{self.port}"

    def url(self, ip: str, path: str) -> str:
        return self.base_url(ip) + path

    def page_urls(self, ip: str) -> set[str]:
        return {self.url(ip, p) for p in self.sites[ip].pages()}

    def answer(self, ip: str, path: str) -> Reply:
        if path == "/robots.txt":
            return Reply(200, "text/plain", ROBOTS_TXT.encode())
        site = self.sites.get(ip)
        reply = site.route(path) if site is not None else None
        return reply or Reply(404, "text/plain", b"not found\n")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        ip, port = writer.get_extra_info("sockname")[:2]
        try:
            while line := await reader.readline():
                start = time.time()
                self.in_flight[ip] += 1
                self.peak_in_flight[ip] = max(self.peak_in_flight[ip], self.in_flight[ip])
                try:
                    method, target, version = line.decode("latin-1").split()
                    headers: dict[str, str] = {}
                    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
                        name, _, value = raw.decode("latin-1").partition(":")
                        name, value = name.strip().lower(), value.strip()
                        headers[name] = f"{headers[name]}, {value}" if name in headers else value
                    body = await reader.readexactly(int(headers.get("content-length") or 0))
                    if self.latency:
                        await asyncio.sleep(self.latency)
                    path = target.split("?", 1)[0].split("#", 1)[0]
                    status, ctype, payload, extra = self.answer(ip, path)
                finally:
                    self.in_flight[ip] -= 1  # the answer is handed over now (no await between)
                conn = headers.get("connection", "").lower()
                keep = "close" not in conn and (version == "HTTP/1.1" or "keep-alive" in conn)
                head = (
                    f"HTTP/1.1 {status} {REASONS.get(status, 'Other')}\r\n"
                    f"Content-Type: {ctype}\r\nContent-Length: {len(payload)}\r\n"
                    f"Connection: {'keep-alive' if keep else 'close'}\r\n"
                    + "".join(f"{name}: {value}\r\n" for name, value in extra)
                    + "\r\n"
                ).encode("latin-1")
                sha1 = hashlib.sha1(body).hexdigest()
                self.log.append(RequestRecord(
                    ip, port, target, method, start, time.time(), status, headers, len(body), sha1,
                    headers.get("if-none-match"), headers.get("if-modified-since"),
                ))  # fmt: skip
                writer.write(head + (b"" if method == "HEAD" else payload))
                await writer.drain()
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # the client went away or sent garbage
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(
        self, socks: list[socket.socket], stop: asyncio.Event, ready: threading.Event
    ) -> None:
        servers = [await asyncio.start_server(self._handle, sock=s) for s in socks]
        ready.set()
        await stop.wait()
        for server in servers:
            server.close()
        for task in list(self._tasks):  # idle keep-alive connections never end by themselves
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def start(self) -> OwnSitesWeb:
        self.port, socks = bind_sockets(list(self.sites))
        ready = threading.Event()
        self._loop = loop = asyncio.new_event_loop()
        self._stop = stop = asyncio.Event()

        def run() -> None:
            try:
                loop.run_until_complete(self._serve(socks, stop, ready))
            finally:
                for sock in socks:
                    sock.close()
                ready.set()

        self._thread = threading.Thread(target=run, name="own-sites", daemon=True)
        self._thread.start()
        if not ready.wait(30) or not self._thread.is_alive():
            raise RuntimeError("the sites' server did not start")
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None or self._stop is None:
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        self._loop.close()
        self._thread = self._loop = None

    def write_log(self, path: str | Path) -> None:
        """The request log as JSON lines (``testkit.testweb.load_log`` reads it)."""
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(asdict(rec)) + "\n" for rec in list(self.log))

    def __enter__(self) -> OwnSitesWeb:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

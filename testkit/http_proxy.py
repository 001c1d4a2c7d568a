"""A tiny forward HTTP proxy on loopback (plain http:// only, no CONNECT).

A client sends ``GET http://host:port/path HTTP/1.1``; the proxy resolves
``host`` itself, forwards the request and relays the answer byte for byte.
Every request is logged (``requests``: method and absolute URL), so a test
sees what reached the proxy, and so what the crawler left to it.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authorization", "proxy-connection", "te",
    "trailer", "transfer-encoding", "upgrade",
}  # fmt: skip


class HttpProxy:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.requests: list[tuple[str, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _forward(self) -> None:
                proxy.requests.append((self.command, self.path))
                target = urlsplit(self.path)
                if target.scheme != "http" or not target.hostname:
                    self.send_error(400, "absolute http:// URL expected")
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                path = target.path or "/"
                if target.query:
                    path += "?" + target.query
                conn = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=30)
                try:
                    conn.request(self.command, path, body=body, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                except OSError as exc:
                    self.send_error(502, f"upstream: {exc}")
                    return
                finally:
                    conn.close()
                self.send_response(answer.status, answer.reason)
                for name, value in answer.getheaders():
                    if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            do_GET = do_HEAD = do_POST = _forward

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def hosts_requested(self) -> set[str]:
        return {urlsplit(url).hostname or "" for _, url in self.requests}

    def start(self) -> HttpProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> HttpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

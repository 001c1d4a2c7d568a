"""A loopback TCP proxy that a test can cut and restore: a network outage in
front of a server that keeps its state (moto forgets everything when stopped).

``cut()`` closes the listening socket (new connections are refused) and
shuts down every open connection (a request in flight fails); ``restore()``
listens again on the same port, so clients configured before keep working.

``drop_next_reply(to)`` loses one answer: the reply to the next request
containing ``to`` is not forwarded, and its connection is shut down on both
sides. The server ran the command; the client sees its connection reset
before the reply (a master killed -9 right after answering, a network cut at
the wrong moment).
"""

from __future__ import annotations

import contextlib
import socket
import threading

BUFFER_BYTES = 64 * 1024


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._drop_marker: bytes | None = None  # armed: drop the reply to a request with it
        self._dropping: set[socket.socket] = set()  # upstreams whose next reply is dropped
        self.dropped = 0  # replies lost so far

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def drop_next_reply(self, to: bytes = b"") -> None:
        """The reply to the next request (bytes a client sends) containing
        ``to`` never reaches its client: the server gets the request, and
        its connection is shut down when the answer comes."""
        with self._lock:
            self._drop_marker = to

    def _mark(self, upstream: socket.socket, data: bytes) -> None:
        with self._lock:
            if self._drop_marker is not None and self._drop_marker in data:
                self._drop_marker = None
                self._dropping.add(upstream)

    def _take_drop(self, upstream: socket.socket) -> bool:
        with self._lock:
            if upstream not in self._dropping:
                return False
            self._dropping.discard(upstream)
            self.dropped += 1
            return True

    def restore(self) -> TcpProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._open = self._open, set()
        if listener is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone may not.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def __enter__(self) -> TcpProxy:
        return self.restore()

    def __exit__(self, *exc: object) -> None:
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._open |= {client, upstream}
            for src, dst, replies in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pump, args=(src, dst, replies), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while data := src.recv(BUFFER_BYTES):
                if replies and self._take_drop(src):
                    break  # the reply is lost: both sides shut down below
                if not replies:
                    self._mark(dst, data)  # before the server can answer it
                dst.sendall(data)
        except OSError:
            pass
        finally:
            # Either side ending ends both: a half-open pair would leak threads.
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)
            src.close()

"""A real TCP relay in front of a server, which a test can cut: the outage is real sockets
closing, the server itself keeps running for the other tests."""

from __future__ import annotations

import contextlib
import socket
import threading


class Relay:
    """Forwards 127.0.0.1:<port> to ``target``; :meth:`cut` closes every connection and
    the listener, so new connections are refused as by a stopped server."""

    def __init__(self, host: str, port: int, *, listen_on: int = 0) -> None:
        """``listen_on``: a port a cut relay listened on, to bring the same address back."""
        self.target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", listen_on))
        self.port = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._up = True
        threading.Thread(target=self._accept, daemon=True, name="relay-accept").start()

    def _accept(self) -> None:
        while self._up:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self._lock:
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        self._up = False
        with contextlib.suppress(OSError):  # wakes the accept() blocked in the other thread
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._open.clear()

"""An HTTP server on a free port of 127.0.0.1, served from a daemon thread: what seer's fake
services (the model hub, the model API) are made of.

A subclass returns its request handler class from :meth:`LoopbackServer.request_handler` and names
the attribute the handler finds the server under (:attr:`LoopbackServer.handler_attribute`);
``start`` binds and serves, ``stop`` releases the port (twice is fine), and the server is a
context manager.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self

__all__ = ["LoopbackServer"]


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer (a cancelled request) is not the server's error:
        no traceback on stderr for it; anything else is printed, as the standard server does."""
        if isinstance(sys.exc_info()[1], ConnectionError):  # broken pipe, reset, aborted
            return
        super().handle_error(request, client_address)


class LoopbackServer:
    """Serves :attr:`handler` on 127.0.0.1 (a free port) until stopped."""

    #: each connection's handler sees this server as ``self.<handler_attribute>``
    handler_attribute: ClassVar[str] = "server_object"
    #: the serving thread's name
    thread_name: ClassVar[str] = "seer-loopback-server"
    #: what the "not running" error calls this server
    what: ClassVar[str] = "the server"

    _httpd: ThreadingHTTPServer | None = None
    _serving: threading.Thread | None = None

    def request_handler(self) -> type[BaseHTTPRequestHandler]:
        """The class that answers each connection's requests."""
        raise NotImplementedError(f"{type(self).__name__} names no request handler")

    def start(self) -> Self:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        handler = self.request_handler()
        bound = type(f"Bound{handler.__name__}", (handler,), {self.handler_attribute: self})
        self._httpd = _Server(("127.0.0.1", 0), bound)
        self._httpd.daemon_threads = True
        self._serving = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=self.thread_name,
            daemon=True,
        )
        self._serving.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; safe to call twice."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._serving is not None:
            self._serving.join(timeout=5)
        self._httpd = self._serving = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``; a ``RuntimeError`` while not serving."""
        if self._httpd is None:
            raise RuntimeError(f"{self.what} is not running; use it as a context manager or call start()")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

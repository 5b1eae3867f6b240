"""The RPC client: calls the exposed functions of an interface served from a sandbox.

:class:`RpcClient` needs only the URL and token (an agent's local process can build one from
:class:`ServedInterface`'s fields without any sandbox object)::

    client = RpcClient(url, token)
    client.call("get_activations", "hello", layer=3)
    [f.signature for f in client.functions()]

It keeps HTTP/1.1 connections alive and pools them, one per call in flight, so calls from several
threads run concurrently. Errors come back as :class:`~seer.errors.RpcError` subclasses:
:class:`~seer.errors.RemoteError` (the function raised: remote type, message, traceback),
:class:`~seer.errors.UnknownFunctionError`, :class:`~seer.errors.BadArgumentsError`,
:class:`~seer.errors.RpcTimeoutError`, :class:`~seer.errors.RequestTooLargeError`,
:class:`~seer.errors.SerializationError`, :class:`~seer.errors.RpcAuthError` and
:class:`~seer.errors.RpcConnectionError`.
"""

from __future__ import annotations

import http.client
import json
import select
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from seer.errors import (
    BadArgumentsError,
    RemoteError,
    RequestTooLargeError,
    RpcAuthError,
    RpcConnectionError,
    RpcError,
    RpcTimeoutError,
    SerializationError,
    UnknownFunctionError,
)
from seer.rpc import wire
from seer.rpc.spec import FunctionSpec

__all__ = ["RpcClient", "ServedInterface"]

#: Extra seconds the client waits beyond a call's timeout for the server's timeout answer.
TIMEOUT_GRACE = 10.0
#: Bodies up to this size are sent in one write together with the headers.
_SMALL = 64 * 1024
_POOL_MAX = 32
#: ``invoke(timeout=...)`` not given: the client's own timeout
_CLIENT_DEFAULT: Any = object()


class RpcClient:
    """Calls the functions of one served interface over HTTP.

    ``timeout`` is how long a call may run (seconds; None: no limit). The server is told it too
    and answers a call still running then with a timeout error (the function's thread goes on
    in the sandbox: threads cannot be killed). Thread-safe; ``close()`` drops the connections.
    """

    def __init__(self, url: str, token: str, *, timeout: float | None = 300.0):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url: expected http://host:port or https://host, got {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._token = token
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._pool: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False
        #: the largest request the server accepts (learnt from its answers)
        self.max_request_bytes: int | None = None

    # --- public API ---------------------------------------------------------------------------
    def call(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``function(*args, **kwargs)`` in the sandbox and return its result."""
        return self.invoke(function, args, kwargs)

    def invoke(
        self,
        function: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        timeout: Any = _CLIENT_DEFAULT,
    ) -> Any:
        """Like :meth:`call`, with the arguments given as a sequence and a mapping (so a function
        with a parameter named ``function`` can be called) and a per-call ``timeout`` in seconds
        (default: the client's; None: no limit)."""
        call_timeout: float | None = self.timeout if timeout is _CLIENT_DEFAULT else timeout
        try:
            parts, total = wire.encode({"args": list(args), "kwargs": dict(kwargs or {})}, label="arguments")
        except SerializationError as exc:
            raise SerializationError(str(exc), function=function) from None
        limit = self.max_request_bytes
        if limit is not None and total > limit:
            raise RequestTooLargeError(_too_large(function, total, limit), function=function, status=413)
        headers = {"Content-Type": wire.CONTENT_TYPE}
        if call_timeout is not None:
            headers["X-Seer-Timeout"] = f"{float(call_timeout):g}"
        status, content_type, body = self._request(
            "POST",
            "/call/" + quote(function, safe=""),
            parts,
            total,
            headers,
            None if call_timeout is None else float(call_timeout) + TIMEOUT_GRACE,
            function,
        )
        payload = self._decode(status, content_type, body, function)
        if status != 200:
            raise _error(status, payload, function)
        if content_type.startswith(wire.CONTENT_TYPE):
            return payload  # a frame holds the result itself
        if not isinstance(payload, dict) or "result" not in payload:
            raise RpcError(f"malformed answer from the RPC server for {function}()", function=function)
        return payload["result"]

    def functions(self) -> list[FunctionSpec]:
        """The exposed functions, as the server describes them."""
        payload = self._get("/functions")
        return [FunctionSpec.from_dict(f) for f in payload.get("functions", [])]

    def health(self) -> dict[str, Any]:
        """The server's status: ``{"status": "ok", "name": ..., "functions": n, ...}``."""
        return dict(self._get("/health"))

    def close(self) -> None:
        """Close the pooled connections. The client can still be used (it reconnects)."""
        with self._lock:
            pool, self._pool = self._pool, []
        for conn in pool:
            conn.close()

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RpcClient({self.url!r})"

    # --- plumbing -----------------------------------------------------------------------------
    def _get(self, path: str) -> Any:
        status, content_type, body = self._request(
            "GET", path, [], 0, {}, _socket_timeout(self.timeout), None
        )
        payload = self._decode(status, content_type, body, None)
        if status != 200:
            raise _error(status, payload, None)
        return payload

    def _connection(self, timeout: float | None) -> tuple[http.client.HTTPConnection, bool]:
        """A pooled connection the server has not closed (checked without sending anything), or
        a new one; and whether it was pooled."""
        while True:
            with self._lock:
                conn = self._pool.pop() if self._pool else None
            if conn is None or not _closed_by_peer(conn):
                break
            conn.close()
        reused = conn is not None
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=timeout)
        else:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
        return conn, reused

    def _release(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._pool) < _POOL_MAX:
                self._pool.append(conn)
                return
        conn.close()

    def _request(
        self,
        method: str,
        path: str,
        parts: list[Any],
        total: int,
        headers: dict[str, str],
        timeout: float | None,
        function: str | None,
    ) -> tuple[int, str, Any]:
        # A request is sent again only when the server provably never ran it: the connection
        # failed before the whole request was handed over (the server runs a call only once its
        # body is complete), or it is a GET. A POST sent whole on a connection that then drops
        # may have run: it is reported, not repeated (pooled connections the server closed are
        # weeded out before use, so that is not the common case of a stale keep-alive).
        for attempt in range(2):
            conn, reused = self._connection(timeout)
            sent = False
            try:
                conn.putrequest(method, self._prefix + path, skip_accept_encoding=True)
                conn.putheader("Authorization", f"Bearer {self._token}")
                conn.putheader("Accept", wire.CONTENT_TYPE)
                for key, value in headers.items():
                    conn.putheader(key, value)
                if method == "POST" or total:
                    conn.putheader("Content-Length", str(total))
                if total <= _SMALL:
                    conn.endheaders(b"".join(parts) if parts else None)
                else:
                    conn.endheaders()
                    for part in parts:
                        conn.send(part)
                sent = True
                response = conn.getresponse()
                body = _read_body(response)
                status = response.status
                content_type = response.getheader("Content-Type", "") or ""
                limit = response.getheader("X-Seer-Max-Request")
                if limit and limit.isdigit():
                    self.max_request_bytes = int(limit)
                if response.will_close:
                    conn.close()
                else:
                    self._release(conn)
                return status, content_type, body
            except TimeoutError:
                conn.close()
                what = f"{function}()" if function else path
                raise RpcTimeoutError(
                    f"{what}: no answer from the RPC server at {self.url} within {timeout or 0:g}s",
                    function=function,
                ) from None
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                conn.close()
                if reused and attempt == 0 and (not sent or method == "GET"):
                    continue  # a kept-alive connection the server had closed: once more, fresh
                if sent and method != "GET":
                    raise RpcConnectionError(
                        f"{function}(): the RPC server at {self.url} closed the connection after "
                        f"the request was sent, without answering ({type(exc).__name__}: {exc}); the call "
                        "may have run, so it was not sent again. rpc_logs() shows what the server did",
                        function=function,
                    ) from None
                if not sent and total > _SMALL:
                    # The server stopped reading: most likely it refused the size.
                    raise RequestTooLargeError(
                        f"{function}(): the RPC server at {self.url} closed the connection while the "
                        f"{total}-byte request was sent (it is probably larger than the server accepts)",
                        function=function,
                    ) from None
                raise RpcConnectionError(
                    f"the RPC server at {self.url} closed the connection: {type(exc).__name__}: {exc}",
                    function=function,
                ) from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise RpcConnectionError(
                    f"cannot reach the RPC server at {self.url} ({type(exc).__name__}: {exc}); is the "
                    "sandbox still running, and the interface still served?",
                    function=function,
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _decode(self, status: int, content_type: str, body: Any, function: str | None) -> Any:
        if content_type.startswith(wire.CONTENT_TYPE):
            try:
                return wire.decode(body)
            except SerializationError as exc:
                raise SerializationError(
                    f"{function + '(): ' if function else ''}{exc}", function=function, status=status
                ) from None
        if content_type.startswith("application/json"):
            try:
                return json.loads(bytes(body))
            except ValueError:
                pass
        text = bytes(body[:300]).decode(errors="replace").strip()
        where = f"{function}(): " if function else ""
        raise RpcError(
            f"{where}unexpected answer from {self.url} (HTTP {status}, {content_type or 'no type'}): {text}",
            function=function,
            status=status,
        )


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    """Whether a kept-alive connection has something to read while no request is in flight:
    the server's close (or bytes it should not have sent). Either way it is not to be reused."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
            return bool(poller.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)
    except (OSError, ValueError):
        return True


def _socket_timeout(timeout: float | None) -> float | None:
    return None if timeout is None else timeout + TIMEOUT_GRACE


def _read_body(response: http.client.HTTPResponse) -> Any:
    length = response.length
    if length is None:
        return bytearray(response.read())
    body = _buffer(length)
    view = memoryview(body).cast("B")
    got = 0
    while got < length:
        n = response.readinto(view[got:])
        if not n:
            raise http.client.IncompleteRead(bytes(view[:got]), length - got)
        got += n
    return body


def _buffer(size: int) -> Any:
    """A writable buffer of ``size`` bytes to read an answer into. A large one is left
    uninitialised (a NumPy array): zero-filling 64 MiB first would cost as much as reading it."""
    if size >= _SMALL:
        try:
            import numpy as np
        except ImportError:
            pass
        else:
            return np.empty(size, dtype=np.uint8)
    return bytearray(size)


def _too_large(function: str, size: int, limit: int) -> str:
    return (
        f"{function}(): the request is {size} bytes; the RPC server accepts at most {limit} "
        "(serve the interface with a larger max_request_bytes, or send less)"
    )


def _error(status: int, payload: Any, function: str | None) -> RpcError:
    """The exception for an error answer."""
    err = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(err, dict):
        return RpcError(f"HTTP {status} from the RPC server", function=function, status=status)
    code = err.get("code", "")
    message = str(err.get("message", "")) or f"HTTP {status}"
    fn = err.get("function") or function
    if code == "remote_error":
        return RemoteError(
            str(err.get("remote_type", "Exception")),
            message,
            str(err.get("traceback", "")),
            function=fn,
            status=status,
        )
    if code in ("unauthorized", "forbidden"):
        return RpcAuthError(message, function=fn, status=status)
    if code == "unknown_function":
        return UnknownFunctionError(message, function=fn, status=status)
    if code == "bad_arguments":
        return BadArgumentsError(message, function=fn, status=status, parameter=err.get("parameter"))
    if code == "timeout":
        return RpcTimeoutError(message, function=fn, status=status)
    if code == "too_large":
        return RequestTooLargeError(message, function=fn, status=status)
    if code in ("unserializable", "malformed"):
        return SerializationError(message, function=fn, status=status)
    return RpcError(message, function=fn, status=status)


@dataclass
class ServedInterface:
    """An interface file served from a sandbox: what an expose mode turns into the agent's tools.

    ``url`` and ``token`` reach its RPC server; ``functions`` describe its ``@expose`` functions
    (name, parameters, signature, docstring, JSON Schema). ``file`` is the local file it was
    served from, ``remote_file`` where it lives in the sandbox and ``doc`` its module docstring.
    """

    name: str
    file: str
    url: str
    token: str = field(repr=False)
    functions: list[FunctionSpec] = field(default_factory=list)
    doc: str = ""
    remote_file: str = ""
    sandbox_id: str | None = None

    def client(self, timeout: float | None = None) -> RpcClient:
        """A client for this interface (``timeout`` per call; None: the client's default, 300 s)."""
        return (
            RpcClient(self.url, self.token)
            if timeout is None
            else RpcClient(self.url, self.token, timeout=timeout)
        )

    def expose(self, mode: str) -> Any:
        """What the expose mode ``mode`` (``library``, ``mcp``, ``prompt``, ``skill`` or a
        plugin's) makes of this interface. Exposures of one served interface share its server and
        token, so any number of them, in any modes, are valid together; all of them end when the
        interface is served again (a new server, a new token)."""
        from seer import plugins

        return plugins.get_expose_mode(mode)().expose(self)

    def function(self, name: str) -> FunctionSpec:
        """The exposed function ``name``."""
        for spec in self.functions:
            if spec.name == name:
                return spec
        raise UnknownFunctionError(
            f"interface {self.name!r} exposes no function {name!r}; it exposes: "
            + (", ".join(f.name for f in self.functions) or "nothing"),
            function=name,
        )

    def to_dict(self) -> dict[str, Any]:
        """The served interface as a JSON-able dict (stored in the sandbox's record, token included)."""
        return {
            "name": self.name,
            "file": self.file,
            "url": self.url,
            "token": self.token,
            "functions": [f.to_dict() for f in self.functions],
            "doc": self.doc,
            "remote_file": self.remote_file,
            "sandbox_id": self.sandbox_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServedInterface:
        """The served interface a :meth:`to_dict` dict describes."""
        return cls(
            name=data["name"],
            file=data.get("file", ""),
            url=data["url"],
            token=data["token"],
            functions=[FunctionSpec.from_dict(f) for f in data.get("functions", [])],
            doc=data.get("doc", ""),
            remote_file=data.get("remote_file", ""),
            sandbox_id=data.get("sandbox_id"),
        )

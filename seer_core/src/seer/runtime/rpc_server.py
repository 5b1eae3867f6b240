"""The RPC server that serves an interface file's ``@expose`` functions (runs inside the sandbox).

``ScopedSandbox.serve`` starts it as a background process::

    python -P -m seer.runtime.rpc_server interface.py --name tools --token-file .seer/rpc/tools.token \\
        --state .seer/rpc/tools.json [--port N] [--path DIR ...]

It binds 127.0.0.1 (a port of its own choosing unless ``--port`` is given), writes the port and
its status (``loading``, then ``ready`` or ``failed`` with the traceback) to the ``--state`` file,
loads the interface (:func:`seer.runtime.interface.load_interface`) and serves it. The token is
read from ``--token-file`` (a file private to the user, written by ``ScopedSandbox.serve``),
which the server deletes at once: it is never on the command line nor in the environment, where
``/proc/<pid>/cmdline`` and ``/proc/<pid>/environ`` would show it for the life of the process.

HTTP, standard library only (:class:`http.server.ThreadingHTTPServer`, HTTP/1.1 keep-alive):

``GET /health``
    ``{"status": "ok" | "loading", "name", "functions": [...], "pid", "max_request_bytes"}``
``GET /functions``
    ``{"name", "doc", "functions": [FunctionSpec.to_dict(), ...]}``
``POST /call/<function>``
    body: a :mod:`seer.rpc.wire` frame of ``{"args": [...], "kwargs": {...}}`` (or the same as
    JSON with ``Content-Type: application/json``); answer 200: a frame holding the result (or,
    when the request does not ``Accept: application/x-seer-rpc``, JSON ``{"result": ...}`` with
    arrays as nested lists).

Every request needs ``Authorization: Bearer <token>``: none is answered 401, a wrong one 403.
Errors are answered as ``{"error": {"code", "message", ...}}``: ``unknown_function`` (404),
``bad_arguments`` (422; the signature and the simple type hints are checked, naming the
parameter), ``too_large`` (413), ``timeout`` (504), ``remote_error`` (500: the function raised;
with ``remote_type`` and ``traceback``; also a result that raised while being encoded, such as a
meta tensor), ``unserializable`` (500: the result holds a type the wire does not carry, named),
``internal`` (500: anything else that failed answering), ``loading`` (503), ``malformed`` (400).
Every request is answered: a connection dropped without an answer would leave a client unable to
tell whether its call ran. A body is read as it arrives, never allocated at its claimed length.

Concurrency: every connection has its own thread and every call runs in a thread of its own, so
a slow call never holds up another. Module state shared between calls is the interface author's
to guard (a ``threading.Lock`` around what must not interleave). A call past its timeout (the
client's ``X-Seer-Timeout`` header, capped by ``--call-timeout``) is answered with a timeout
error at once; its thread cannot be killed and runs on in the background.

One line per request goes to stdout (the process log): the function, the outcome and the
duration, never argument values.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import hmac
import http
import inspect
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from seer.errors import InterfaceError, SerializationError
from seer.rpc import wire
from seer.rpc.spec import POSITIONAL_ONLY, FunctionSpec, TypeCheck, parse_annotation
from seer.runtime.interface import LoadedInterface, is_async, load_interface

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "RpcServer", "main", "read_token_file"]

DEFAULT_MAX_REQUEST_BYTES = 512 * 1024 * 1024
#: calls running at once (more wait for a thread, their timeout counting)
DEFAULT_MAX_WORKERS = 256
_SMALL = 64 * 1024
#: a request body's first read buffer, and the most it grows by at once
_CHUNK = 1 << 20
_GROWTH = 16 << 20
_JSON = "application/json"


@dataclass
class _Function:
    """An exposed function, ready to be called: its signature and the checks of its hints."""

    name: str
    fn: Callable[..., Any]
    spec: FunctionSpec
    signature: inspect.Signature | None
    checks: dict[str, TypeCheck]
    positional_only: list[str]
    is_async: bool

    @classmethod
    def build(cls, name: str, fn: Callable[..., Any], spec: FunctionSpec) -> _Function:
        try:
            signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            signature = None
        checks = {}
        for p in spec.params:
            check = parse_annotation(p.annotation)
            if check.kind != "any":
                checks[p.name] = check
        return cls(
            name,
            fn,
            spec,
            signature,
            checks,
            [p.name for p in spec.params if p.kind == POSITIONAL_ONLY],
            is_async(fn),
        )

    def bind(self, args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """The arguments checked against the signature and hints (raises _BadArguments)."""
        # A positional-only parameter may be given by name (MCP passes everything by name).
        for i, pname in enumerate(self.positional_only):
            if pname in kwargs and len(args) == i:
                args.append(kwargs.pop(pname))
        if self.signature is None:
            return args, kwargs
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise _BadArguments(
                f"{self.name}(): {exc}; its signature is {self.name}{self.spec.signature}",
                _parameter_in(str(exc)),
            ) from None
        for pname, value in bound.arguments.items():
            check = self.checks.get(pname)
            if check is None:
                continue
            problem = check.problem(value, f"argument {pname!r}")
            if problem:
                raise _BadArguments(f"{self.name}(): {problem}", pname)
            bound.arguments[pname] = check.coerce(value)
        return list(bound.args), dict(bound.kwargs)


class _BadArguments(Exception):
    def __init__(self, message: str, parameter: str | None):
        super().__init__(message)
        self.parameter = parameter


def _parameter_in(message: str) -> str | None:
    start = message.find("'")
    end = message.find("'", start + 1)
    return message[start + 1 : end] if 0 <= start < end else None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128
    rpc: RpcServer

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN, which can hang on a sandbox's DNS.
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(self.server_address)
        self.server_address = self.socket.getsockname()
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


class RpcServer:
    """The HTTP server of one interface. ``start()`` serves in a background thread; the interface
    is handed over with :meth:`set_interface` once loaded (until then calls answer 503)."""

    def __init__(
        self,
        *,
        token: str,
        name: str = "interface",
        host: str = "127.0.0.1",
        port: int = 0,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        call_timeout: float | None = None,
        max_workers: int = DEFAULT_MAX_WORKERS,
        log: Callable[[str], None] | None = None,
    ):
        if not token:
            raise ValueError("the RPC server needs a token")
        self.name = name
        self.max_request_bytes = max_request_bytes
        self.call_timeout = call_timeout
        self._auth = f"Bearer {token}".encode()
        self._log = log or _print
        self.status = "loading"
        self.doc = ""
        self.functions: dict[str, _Function] = {}
        self.httpd = _HTTPServer((host, port), _Handler, bind_and_activate=False)
        self.httpd.rpc = self
        try:
            self.httpd.server_bind()
        except OSError:
            if not port:
                raise
            # The port asked for (a re-served interface's old one) is taken: any port will do.
            self.httpd.server_address = (host, 0)
            self.httpd.server_bind()
        self.httpd.server_activate()
        self._thread: threading.Thread | None = None
        # Calls with a timeout run on these threads (reused: starting a thread per call costs
        # more than the rest of a call); a call past its timeout keeps its thread until it ends.
        self._workers = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="seer-rpc-call"
        )

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_interface(self, loaded: LoadedInterface) -> None:
        """Serve ``loaded``'s exposed functions from now on."""
        self.functions = {
            name: _Function.build(name, fn, loaded.specs[name]) for name, fn in loaded.functions.items()
        }
        self.doc = loaded.doc
        self.status = "ok"

    def start(self) -> RpcServer:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="seer-rpc-http", daemon=True
        )
        self._thread.start()
        return self

    def shutdown(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(timeout=5)
        self.httpd.server_close()
        self._workers.shutdown(wait=False, cancel_futures=True)

    def log(self, text: str) -> None:
        self._log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}")

    # --- calls ------------------------------------------------------------------------------
    def invoke(
        self, function: _Function, args: list[Any], kwargs: dict[str, Any], timeout: float | None
    ) -> Any:
        """Run the function (in a thread of its own when there is a timeout). Returns
        ``("ok", result)``, ``("error", exception)`` or ``("timeout", None)``."""
        if timeout is None:
            return _run(function, args, kwargs)
        future = self._workers.submit(_run, function, args, kwargs)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()  # when it has not started yet (every worker busy): never start it
            return ("timeout", None)


def _run(function: _Function, args: list[Any], kwargs: dict[str, Any]) -> tuple[str, Any]:
    try:
        result = function.fn(*args, **kwargs)
        if function.is_async or inspect.isawaitable(result):
            result = asyncio.run(_await(result))
        return ("ok", result)
    except BaseException as exc:  # SystemExit from user code must not stop the server
        return ("error", exc)


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _remote_type(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _text(exc: BaseException) -> str:
    """``str(exc)``, or what can be said when its ``__str__`` itself raises."""
    try:
        return str(exc)
    except Exception:
        return f"<{_remote_type(exc)} whose message cannot be shown>"


def _remote_traceback(exc: BaseException) -> str:
    tb = exc.__traceback__
    here = (__file__, inspect.getfile(load_interface))
    while tb is not None and tb.tb_frame.f_code.co_filename in here:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "seer-rpc"
    #: a kept-alive connection idle this long (s) is closed (clients reconnect)
    timeout = 900
    server: _HTTPServer
    #: whether the current request's answer has started going out
    _answered = False

    def setup(self) -> None:
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        return  # one line per call is logged by the server itself, without any argument values

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # --- answers ------------------------------------------------------------------------------
    def _framed(self) -> bool:
        return wire.CONTENT_TYPE in (self.headers.get("Accept") or "")

    def _encode(self, value: Any, label: str = "value") -> tuple[list[Any], int, str]:
        """The body for ``value`` in the format the client accepts (raises SerializationError)."""
        if self._framed():
            parts, total = wire.encode(value, label=label)
            return parts, total, wire.CONTENT_TYPE
        body = json.dumps(wire.to_jsonable(value)).encode()
        return [body], len(body), _JSON

    def _send(self, status: int, value: Any, *, close: bool = False) -> None:
        self._write(status, *self._encode(value), close=close)

    def _write(
        self, status: int, parts: list[Any], total: int, content_type: str, *, close: bool = False
    ) -> None:
        rpc = self.server.rpc
        head = (
            f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {total}\r\n"
            f"X-Seer-Max-Request: {rpc.max_request_bytes}\r\n"
            + ("Connection: close\r\n" if close else "")
            + "\r\n"
        ).encode("latin-1")
        if close:
            self.close_connection = True
        self._answered = True
        if total <= _SMALL:
            self.wfile.write(head + b"".join(parts))
            return
        pending = [head]
        for part in parts:
            if len(part) <= _SMALL:
                pending.append(part)
                continue
            self.wfile.write(b"".join(pending))
            pending = []
            self.wfile.write(part)  # straight from the array's memory
        if pending:
            self.wfile.write(b"".join(pending))

    def _error(self, status: int, code: str, message: str, *, close: bool = False, **extra: Any) -> None:
        self._send(status, {"error": {"code": code, "message": message, **extra}}, close=close)

    # --- requests -----------------------------------------------------------------------------
    def _handle(self, method: str) -> None:
        """Answer one request. Whatever goes wrong is answered (500 ``internal``) when no answer
        has started: a connection dropped without one would leave the client unable to tell
        whether its call ran."""
        self._answered = False
        try:
            self._dispatch(method)
        except Exception as exc:
            rpc = self.server.rpc
            rpc.log(f"internal error answering {method} {self.path[:100]!r}: {_remote_type(exc)}")
            if self._answered:
                self.close_connection = True
                return
            self._error(
                500,
                "internal",
                f"the RPC server failed answering this request: {_remote_type(exc)}: {_text(exc)}",
                close=True,
            )

    def _dispatch(self, method: str) -> None:
        rpc = self.server.rpc
        started = time.perf_counter()
        path = unquote(self.path.split("?", 1)[0])
        auth = self.headers.get("Authorization")
        if not auth:
            rpc.log(f"refused {method} {path[:100]!r}: no token (401)")
            self._error(
                401,
                "unauthorized",
                "this RPC server needs its token: send 'Authorization: Bearer <token>'",
                close=True,
            )
            return
        if not hmac.compare_digest(auth.encode("latin-1", "replace"), rpc._auth):
            rpc.log(f"refused {method} {path[:100]!r}: wrong token (403)")
            self._error(
                403,
                "forbidden",
                "wrong token for this RPC server. A handle (library, MCP config, prompt, skill, "
                "client) made from an earlier serve() of this interface ended when it was served "
                "again, with a new token: use what the latest serve() returned",
                close=True,
            )
            return
        if method == "GET" and path == "/health":
            self._send(
                200,
                {
                    "status": rpc.status,
                    "name": rpc.name,
                    "functions": sorted(rpc.functions),
                    "pid": os.getpid(),
                    "max_request_bytes": rpc.max_request_bytes,
                },
            )
            return
        if method == "GET" and path == "/functions":
            if rpc.status != "ok":
                self._error(503, "loading", f"interface {rpc.name!r} is still loading")
                return
            self._send(
                200,
                {
                    "name": rpc.name,
                    "doc": rpc.doc,
                    "functions": [f.spec.to_dict() for f in rpc.functions.values()],
                },
            )
            return
        if path.startswith("/call/"):
            if method != "POST":
                self._error(405, "method_not_allowed", "call a function with POST", close=True)
                return
            self._call(path[len("/call/") :], started)
            return
        self._error(404, "not_found", f"no such endpoint: {method} {path[:200]}", close=True)

    def _read_body(self) -> bytearray | None:
        """The request's body, or None after answering why it cannot be read."""
        rpc = self.server.rpc
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            self._error(411, "length_required", "send the body with a Content-Length", close=True)
            return None
        try:
            length = int(length_text)
            if length < 0:
                raise ValueError
        except ValueError:
            self._error(400, "malformed", f"bad Content-Length {length_text[:40]!r}", close=True)
            return None
        if length > rpc.max_request_bytes:
            message = (
                f"the request is {length} bytes; this RPC server accepts at most {rpc.max_request_bytes} "
                "(serve the interface with a larger max_request_bytes, or send less)"
            )
            if length <= 2 * rpc.max_request_bytes:
                _drain(self.rfile, length)  # so the client reads this answer, not a reset
                self._error(413, "too_large", message)
            else:
                self._error(413, "too_large", message, close=True)
            return None
        # The buffer grows with what arrives (doubling, at most _GROWTH a step), never to the
        # claimed length up front: a client claiming 500 MB and sending 10 bytes costs nothing.
        body = bytearray(min(length, _CHUNK))
        got = 0
        while got < length:
            if got == len(body):
                body.extend(bytes(min(len(body), _GROWTH, length - len(body))))
            with memoryview(body) as view, view[got:] as window:
                n = self.rfile.readinto(window)
            if not n:
                self.close_connection = True
                return None
            got += n
        return body

    def _call(self, name: str, started: float) -> None:
        rpc = self.server.rpc
        body = self._read_body()
        if body is None:
            rpc.log(f"call {name[:100]!r} refused: request not read")
            return
        if rpc.status != "ok":
            self._error(503, "loading", f"interface {rpc.name!r} is still loading", function=name)
            return
        function = rpc.functions.get(name)
        if function is None:
            rpc.log(f"call {name[:100]!r} unknown_function (404)")
            listing = ", ".join(sorted(rpc.functions)) or "none"
            self._error(
                404,
                "unknown_function",
                f"interface {rpc.name!r} exposes no function {name[:100]!r}; it exposes: {listing}",
                function=name[:100],
            )
            return
        try:
            args, kwargs = self._arguments(body)
            args, kwargs = function.bind(args, kwargs)
        except _BadArguments as exc:
            rpc.log(f"call {name} bad_arguments (422) {_ms(started)}")
            self._error(422, "bad_arguments", str(exc), function=name, parameter=exc.parameter)
            return
        except SerializationError as exc:
            rpc.log(f"call {name} malformed (400) {_ms(started)}")
            self._error(400, "malformed", f"{name}(): {exc}", function=name)
            return
        timeout = self._timeout()
        outcome, value = rpc.invoke(function, args, kwargs, timeout)
        if outcome == "timeout":
            rpc.log(f"call {name} timeout (504) after {_ms(started)}; its thread runs on")
            self._error(
                504,
                "timeout",
                f"{name}() ran past its {timeout:g}s timeout (it may still be running in the sandbox)",
                function=name,
            )
            return
        if outcome == "error":
            rpc.log(f"call {name} error {_remote_type(value)} (500) {_ms(started)}")
            self._error(
                500,
                "remote_error",
                _text(value),
                function=name,
                remote_type=_remote_type(value),
                traceback=_remote_traceback(value),
            )
            return
        try:
            answer = self._encode(value, "result") if self._framed() else self._encode({"result": value})
        except SerializationError as exc:
            rpc.log(f"call {name} unserializable (500) {_ms(started)}")
            self._error(500, "unserializable", f"{name}() returned a value that {exc}", function=name)
            return
        except Exception as exc:
            # Encoding ran code of the value's own (a meta tensor's copy, a deep nesting): the call
            # ran once and failed there, so it is answered as the function's error, never dropped
            # (a dropped connection reads to the client as a request that may be sent again).
            rpc.log(f"call {name} error encoding the result {_remote_type(exc)} (500) {_ms(started)}")
            self._error(
                500,
                "remote_error",
                f"{name}() returned a value that could not be sent: {_remote_type(exc)}: {_text(exc)}",
                function=name,
                remote_type=_remote_type(exc),
                traceback=_remote_traceback(exc),
            )
            return
        # Logged before the answer goes out, so a client that has its answer finds the line.
        rpc.log(f"call {name} ok {_ms(started)}")
        self._write(200, *answer)

    def _arguments(self, body: bytearray) -> tuple[list[Any], dict[str, Any]]:
        content_type = self.headers.get("Content-Type") or ""
        payload: Any
        if content_type.startswith(wire.CONTENT_TYPE):
            payload = wire.decode(body)
        elif content_type.startswith(_JSON) or not body:
            try:
                payload = json.loads(body) if body else {}
            except ValueError as exc:
                raise SerializationError(f"the body is not JSON: {exc}") from None
            except RecursionError:
                raise SerializationError("the body is nested too deeply to read") from None
        else:
            raise SerializationError(f"unsupported Content-Type {content_type[:60]!r}")
        if not isinstance(payload, dict):
            raise SerializationError("the body must be {'args': [...], 'kwargs': {...}}")
        args = payload.get("args") or []
        kwargs = payload.get("kwargs") or {}
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise SerializationError("the body must be {'args': [...], 'kwargs': {...}}")
        if not all(isinstance(k, str) for k in kwargs):
            raise SerializationError("keyword argument names must be strings")
        return args, kwargs

    def _timeout(self) -> float | None:
        rpc = self.server.rpc
        asked: float | None = None
        text = self.headers.get("X-Seer-Timeout")
        if text:
            try:
                asked = float(text)
            except ValueError:
                asked = None
            if asked is not None and asked <= 0:
                asked = None
        limits = [t for t in (asked, rpc.call_timeout) if t is not None]
        return min(limits) if limits else None


def _drain(rfile: Any, length: int) -> None:
    left = length
    while left > 0:
        chunk = rfile.read(min(left, 1 << 20))
        if not chunk:
            return
        left -= len(chunk)


def _ms(started: float) -> str:
    return f"{(time.perf_counter() - started) * 1e3:.1f} ms"


def _print(text: str) -> None:
    print(text, flush=True)


# --- the process ------------------------------------------------------------------------------
def _write_state(path: str | None, state: dict[str, Any]) -> None:
    if not path:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(state, fh)
    os.replace(tmp, target)


def read_token_file(path: str) -> str:
    """The token in ``path`` (surrounding whitespace stripped), the file deleted once read so
    the token is nowhere on disk while the server runs. Raises ValueError for an empty file."""
    try:
        token = Path(path).read_text().strip()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    if not token:
        raise ValueError("the file is empty")
    return token


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m seer.runtime.rpc_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("interface", help="the interface file")
    parser.add_argument("--name", help="the interface's name (its module name; default: the file's stem)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free one)")
    parser.add_argument(
        "--token-file", required=True, help="file holding the token clients must send (deleted once read)"
    )
    parser.add_argument(
        "--models-key-file",
        help="file holding the sandbox's models key, which finds hidden models by name (deleted once read)",
    )
    parser.add_argument("--state", help="file to write the port and status to (JSON)")
    parser.add_argument("--launch", default="", help="an id written into the state file")
    parser.add_argument("--path", action="append", default=[], help="a directory to put on sys.path")
    parser.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES)
    parser.add_argument("--call-timeout", type=float, default=None, help="the longest a call may run (s)")
    opts = parser.parse_args(argv)
    try:
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        pass

    try:
        token = read_token_file(opts.token_file)
    except (OSError, ValueError) as exc:
        print(f"error: --token-file {opts.token_file}: {exc}", file=sys.stderr)
        return 2
    if opts.models_key_file:
        from seer.runtime.models import set_models_key

        try:
            set_models_key(read_token_file(opts.models_key_file))
        except (OSError, ValueError) as exc:
            print(f"error: --models-key-file {opts.models_key_file}: {exc}", file=sys.stderr)
            return 2
    name = opts.name or Path(opts.interface).stem
    server = RpcServer(
        token=token,
        name=name,
        host=opts.host,
        port=opts.port,
        max_request_bytes=opts.max_request_bytes,
        call_timeout=opts.call_timeout,
    )
    del token
    base = {
        "name": name,
        "launch": opts.launch,
        "pid": os.getpid(),
        "port": server.port,
        "interface": opts.interface,
    }
    _write_state(opts.state, {**base, "status": "loading"})
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    server.start()
    server.log(f"listening on {opts.host}:{server.port}; loading {opts.interface}")
    started = time.perf_counter()
    try:
        loaded = load_interface(opts.interface, name=name, extra_paths=opts.path)
    except BaseException as exc:
        if isinstance(exc, SystemExit) and stop.is_set():
            server.shutdown()
            return 0
        text = str(exc) if isinstance(exc, InterfaceError) else _remote_traceback(exc)
        server.log(f"loading {opts.interface} failed:\n{text}")
        _write_state(
            opts.state,
            {**base, "status": "failed", "error": _remote_type(exc), "message": str(exc), "traceback": text},
        )
        server.shutdown()
        return 1
    server.set_interface(loaded)
    _write_state(opts.state, {**base, "status": "ready", "functions": sorted(loaded.functions)})
    server.log(f"serving {name!r}: {', '.join(sorted(loaded.functions))} (loaded in {_ms(started)})")
    try:
        while not stop.wait(3600):
            pass
    except SystemExit:
        pass
    server.log("stopping")
    server.shutdown()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: that would wait for the threads of calls that ran past their timeout.
    os._exit(code)

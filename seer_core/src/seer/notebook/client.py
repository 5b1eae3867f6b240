"""Talking to the sandbox's Jupyter server: :class:`JupyterClient` over its REST API
(sessions, kernels, contents) and :class:`KernelChannels`, one kernel's channels websocket
(``/api/kernels/<id>/channels``), never ZMQ, so both work through whatever tunnel a provider uses
to expose the server's port."""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import queue
import struct
import threading
import urllib.parse
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from seer.errors import (
    NotebookError,
)
from seer.notebook.document import check_notebook_path

__all__ = [
    "CONNECT_TIMEOUT",
    "KERNEL_WS_PROTOCOL",
    "NOTEBOOK_PURPOSE",
    "ChannelClosed",
    "JupyterClient",
    "KernelChannels",
    "KernelRestarted",
    "decode_v1",
    "encode_v1",
    "quote_path",
]

if TYPE_CHECKING:
    pass


#: What needs the notebook client packages, as :class:`~seer.errors.MissingExtraError` says it.
NOTEBOOK_PURPOSE = "a notebook session (talking to the sandbox's Jupyter kernel)"
#: Longest wait for a kernel (and whatever its start-up imports) to accept a connection.
CONNECT_TIMEOUT = 180.0

# --- the Jupyter server's REST API -----------------------------------------------------------


class JupyterClient:
    """A minimal client for a Jupyter server's REST API, authenticating with its token.

    Plain :mod:`http.client`: one short connection per request, no proxies (the server is on
    127.0.0.1 or behind the provider's tunnel).
    """

    def __init__(self, url: str, token: str, *, timeout: float = 60.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise NotebookError(f"not a Jupyter server URL: {url!r}")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")

    @classmethod
    def from_url(cls, jupyter_url: str) -> JupyterClient:
        """A client for ``<server>/?token=<token>`` (the form ``sandbox.jupyter_url`` has)."""
        parts = urllib.parse.urlsplit(jupyter_url)
        token = urllib.parse.parse_qs(parts.query).get("token", [""])[0]
        if not token:
            raise NotebookError("the Jupyter URL carries no ?token=")
        base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        return cls(base, token)

    @property
    def jupyter_url(self) -> str:
        """The server's URL with its token, for a browser."""
        return f"{self.url}/?token={urllib.parse.quote(self.token)}"

    def ws_url(self, path: str) -> str:
        """The websocket URL of ``path`` on this server (``ws`` or ``wss``, as the server is served)."""
        scheme = "wss" if self._https else "ws"
        netloc = self._host if self._port is None else f"{self._host}:{self._port}"
        return f"{scheme}://{netloc}{self._prefix}{path}"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float | None = None,
        token: str | None = None,
    ) -> tuple[int, Any]:
        """``(status, decoded JSON or None)``. ``token`` overrides the client's ("" sends none)."""
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout or self.timeout)
        headers = {"Accept": "application/json"}
        use = self.token if token is None else token
        if use:
            headers["Authorization"] = f"token {use}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, self._prefix + path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode(errors="replace")
        return resp.status, decoded

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float | None = None,
        expect: tuple[int, ...] = (200, 201, 204),
    ) -> Any:
        """Like :meth:`request`, raising :class:`~seer.errors.NotebookError` on an unexpected status."""
        try:
            status, data = self.request(method, path, body, timeout=timeout)
        except OSError as exc:
            raise NotebookError(
                f"{method} {path}: cannot reach the Jupyter server at {self.url}: {exc}"
            ) from exc
        if status not in expect:
            message = data.get("message") if isinstance(data, dict) else data
            raise NotebookError(f"{method} {path}: HTTP {status}: {message or 'no message'}")
        return data

    def status(self, *, timeout: float | None = None) -> dict[str, Any]:
        """``GET /api/status``."""
        result: dict[str, Any] = self.call("GET", "/api/status", timeout=timeout)
        return result

    def start_kernel(self, name: str = "python3", *, path: str = "") -> str:
        """Start a kernel (working directory: the server's root + ``path``); return its id."""
        model = self.call("POST", "/api/kernels", {"name": name, "path": path})
        return str(model["id"])

    def kernel(self, kernel_id: str) -> dict[str, Any] | None:
        """The kernel's model, or None if the server no longer has it."""
        status, data = self.request("GET", f"/api/kernels/{kernel_id}")
        if status == 404:
            return None
        if status != 200:
            raise NotebookError(f"GET /api/kernels/{kernel_id}: HTTP {status}")
        return dict(data)

    def sessions(self) -> list[dict[str, Any]]:
        """The server's sessions (``GET /api/sessions``), as Jupyter returns them."""
        return list(self.call("GET", "/api/sessions"))

    def path_exists(self, path: str) -> bool:
        """Whether ``path`` (a notebook or folder, relative to the server's root) exists on the server."""
        status, _ = self.request("GET", f"/api/contents/{quote_path(path)}?content=0")
        return status == 200

    def read_notebook(self, path: str) -> dict[str, Any]:
        """The notebook at ``path`` (relative to the server's root) as an nbformat dict, as the
        server reads it (older nbformat versions converted to 4; the trust marks it adds to cells
        removed). Raises
        :class:`~seer.errors.NotebookError` naming the path when there is none, or it is not a
        readable notebook."""
        check_notebook_path(path)
        status, model = self.request("GET", f"/api/contents/{quote_path(path)}?type=notebook&content=1")
        if status == 404:
            raise NotebookError(f"there is no notebook {path!r} on the Jupyter server at {self.url}")
        message = model.get("message") if isinstance(model, dict) else model
        if status != 200 or not isinstance(model, dict) or not isinstance(model.get("content"), dict):
            raise NotebookError(f"cannot read notebook {path!r}: HTTP {status}: {message or 'no message'}")
        content: dict[str, Any] = model["content"]
        for cell in content.get("cells") or []:
            if isinstance(cell, dict) and isinstance(cell.get("metadata"), dict):
                cell["metadata"].pop("trusted", None)  # the server's mark for this read, not the notebook's
        return content

    def list_notebooks(
        self, directory: str = "", *, depth: int = 4, limit: int = 500
    ) -> list[dict[str, Any]]:
        """The notebooks under ``directory`` (the server's root by default), ``depth`` folders
        deep at most, hidden ones left out: ``[{"path", "last_modified", "size"}]``, sorted by
        path, ``limit`` at most. Raises :class:`~seer.errors.NotebookError` if ``directory`` is
        not a folder on the server."""
        found: list[dict[str, Any]] = []

        def walk(folder: str, level: int) -> None:
            status, model = self.request(
                "GET", f"/api/contents/{quote_path(folder)}?type=directory&content=1"
            )
            if status != 200 or not isinstance(model, dict) or not isinstance(model.get("content"), list):
                if folder == directory.strip("/"):
                    raise NotebookError(
                        f"{directory!r} is not a folder on the Jupyter server at {self.url} (HTTP {status})"
                    )
                return
            for item in sorted(model["content"], key=lambda i: str(i.get("path"))):
                if len(found) >= limit or str(item.get("name", "")).startswith("."):
                    continue
                if item.get("type") == "notebook":
                    found.append({k: item.get(k) for k in ("path", "last_modified", "size")})
                elif item.get("type") == "directory" and level < depth:
                    walk(str(item["path"]), level + 1)

        walk(directory.strip("/"), 1)
        return sorted(found, key=lambda i: str(i["path"]))

    def notebook_session(self, path: str) -> str | None:
        """The id of the session on the server whose notebook is ``path``, if one is."""
        for model in self.sessions():
            if model.get("path") == path:
                return str(model.get("id"))
        return None


def quote_path(path: str) -> str:
    """``path`` (relative to the server's root) quoted for a contents or sessions API URL."""
    return urllib.parse.quote(path.strip("/"))


# --- the kernel channels websocket ----------------------------------------------------------


class ChannelClosed:
    """Put in the inbox when the websocket closes."""

    def __init__(self, reason: str):
        self.reason = reason


class KernelRestarted:
    """Put in the inbox when ``restart()`` takes the kernel away from a running cell."""


#: The kernel websocket protocol seer asks for (jupyter_server 2 and later; JupyterLab 4 speaks it
#: too). The server passes the kernel's frames through as they are, where the legacy protocol has
#: it decode every message and encode it again as JSON, both ways, on the event loop that carries
#: every kernel's messages. A server that does not offer it gets the legacy protocol.
KERNEL_WS_PROTOCOL = "v1.kernel.websocket.jupyter.org"
#: The message's parts in a v1 frame, after the channel: then its buffers.
_V1_PARTS = ("header", "parent_header", "metadata", "content")


def encode_v1(channel: str, parts: list[bytes]) -> bytes:
    """One v1 websocket frame: the number of offsets and the offsets (little-endian 64-bit, from
    the frame's start), then the channel's name and ``parts``, back to back. The first offset is
    where the channel begins, each next one where the one before ends."""
    body = [channel.encode(), *parts]
    count = len(body) + 1
    offsets = [8 * (count + 1)]
    for piece in body:
        offsets.append(offsets[-1] + len(piece))
    return struct.pack(f"<{count + 1}Q", count, *offsets) + b"".join(body)


def decode_v1(data: bytes) -> tuple[str, list[bytes]]:
    """The channel and the parts of a v1 websocket frame (see :func:`encode_v1`); ValueError for
    bytes that are not one."""
    count = int.from_bytes(data[:8], "little") if len(data) >= 8 else 0
    offsets = struct.unpack_from(f"<{count}Q", data, 8) if count >= 2 and 8 * (count + 1) <= len(data) else ()
    if (
        not offsets
        or offsets[0] != 8 * (count + 1)
        or offsets[-1] != len(data)
        or list(offsets) != sorted(offsets)
    ):
        raise ValueError(f"not a v1 kernel websocket frame ({len(data)} bytes)")
    view = memoryview(data)
    channel = bytes(view[offsets[0] : offsets[1]]).decode()
    return channel, [bytes(view[a:b]) for a, b in itertools.pairwise(offsets[1:])]


def _v1_message(data: bytes) -> dict[str, Any]:
    """A kernel message from a v1 frame, in the shape the legacy protocol's JSON has."""
    channel, parts = decode_v1(data)
    msg: dict[str, Any] = {name: json.loads(part) for name, part in zip(_V1_PARTS, parts, strict=False)}
    header = msg.get("header") or {}
    msg.update(
        channel=channel,
        buffers=parts[len(_V1_PARTS) :],
        msg_id=header.get("msg_id"),
        msg_type=header.get("msg_type"),
    )
    return msg


def _decode_binary(data: bytes) -> dict[str, Any]:
    """A legacy-protocol binary frame: a message with buffers."""
    nbufs = struct.unpack("!i", data[:4])[0]
    offsets: list[int | None] = list(struct.unpack("!" + "I" * nbufs, data[4 : 4 * (nbufs + 1)]))
    offsets.append(None)
    bufs = [data[start:stop] for start, stop in itertools.pairwise(offsets)]
    msg: dict[str, Any] = json.loads(bufs[0].decode())
    msg["buffers"] = bufs[1:]
    return msg


class KernelChannels:
    """One websocket to ``/api/kernels/<id>/channels`` and a thread reading it into a queue.

    The reader thread also answers the server's pings, so an idle session stays connected.
    It speaks the v1 protocol (:data:`KERNEL_WS_PROTOCOL`) where the server offers it, the legacy
    JSON one elsewhere; messages look the same to callers either way.
    """

    #: The subprotocols asked for when connecting, the preferred first (none: legacy JSON).
    protocols: tuple[str, ...] = (KERNEL_WS_PROTOCOL,)

    def __init__(
        self,
        client: JupyterClient,
        kernel_id: str,
        *,
        session: str | None = None,
        timeout: float = CONNECT_TIMEOUT,
    ):
        from seer.extras import require

        websocket = require("websocket", NOTEBOOK_PURPOSE)
        # Reconnecting with the same ``session`` makes the server replay what the kernel sent
        # while we were away (it buffers a kernel's output while no client is connected).
        self.session = session or uuid.uuid4().hex
        self.inbox: queue.Queue[Any] = queue.Queue()
        url = client.ws_url(f"/api/kernels/{kernel_id}/channels?session_id={self.session}")
        try:
            self._ws = websocket.create_connection(
                url,
                header=[f"Authorization: token {client.token}"],
                timeout=timeout,
                enable_multithread=True,
                suppress_origin=True,
                subprotocols=list(self.protocols) or None,
            )
        except Exception as exc:
            raise NotebookError(f"cannot open the kernel websocket for kernel {kernel_id}: {exc}") from exc
        #: whether the server took the v1 protocol (else messages go as legacy JSON)
        self.v1 = self._ws.getsubprotocol() == KERNEL_WS_PROTOCOL
        self._ws.settimeout(None)
        self.closed = False
        self._thread = threading.Thread(target=self._read, name=f"seer-kernel-{kernel_id[:8]}", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        reason = "the server closed it"
        try:
            while True:
                data = self._ws.recv()
                if not data:
                    break
                if isinstance(data, str):
                    msg = json.loads(data)
                else:
                    msg = _v1_message(data) if self.v1 else _decode_binary(data)
                self.inbox.put(msg)
        except Exception as exc:  # closed by us or by the server
            reason = f"{type(exc).__name__}: {exc}"
        self.closed = True
        self.inbox.put(ChannelClosed(reason))

    def message(self, msg_type: str, content: dict[str, Any], channel: str = "shell") -> dict[str, Any]:
        """A new kernel protocol message of ``msg_type`` for ``channel``, with a fresh id."""
        return {
            "header": {
                "msg_id": uuid.uuid4().hex,
                "msg_type": msg_type,
                "username": "seer",
                "session": self.session,
                "date": datetime.now(UTC).isoformat(),
                "version": "5.3",
            },
            "parent_header": {},
            "metadata": {},
            "content": content,
            "buffers": [],
            "channel": channel,
        }

    def send(self, msg: dict[str, Any]) -> None:
        """Send ``msg`` (from :meth:`message`) to the kernel."""
        try:
            if self.v1:
                parts = [json.dumps(msg[name]).encode() for name in _V1_PARTS]
                self._ws.send_binary(encode_v1(msg["channel"], parts + list(msg.get("buffers") or ())))
            else:
                self._ws.send(json.dumps(msg))
        except Exception as exc:
            raise NotebookError(f"cannot send to the kernel: {exc}") from exc

    def get(self, timeout: float | None) -> Any:
        """The next message (or :class:`ChannelClosed` / :class:`KernelRestarted`), or None after
        ``timeout``."""
        try:
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        """Close the websocket; the reader thread puts a :class:`ChannelClosed` and ends."""
        if not self.closed:
            with contextlib.suppress(Exception):
                self._ws.send_close()
            with contextlib.suppress(Exception):
                self._ws.abort()
        self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            self._ws.shutdown()

"""What the fake control plane knows: apps, images, volumes, secrets, sandboxes and their execs.

The records live on the server's event loop (handlers mutate them there; worker threads hand
results back with ``call_soon_threadsafe``); tests read them from outside, e.g.
``fake.state.sandboxes[sb.object_id].gpu``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from modal_proto import api_pb2

if TYPE_CHECKING:
    from seer_modal.testing.engine import DockerEngine, ExecProcess

__all__ = ["FakeApp", "FakeExec", "FakeImage", "FakeSandbox", "FakeState", "FakeVolume", "Output", "new_id"]

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def new_id(prefix: str, length: int = 22, last: str = "") -> str:
    """A Modal-shaped object id: ``<prefix>-`` and ``length`` base62 characters.

    The shape carries meaning to the SDK: a sandbox id of exactly 22 base62 characters picks the
    older (V1) backend in ``Sandbox.from_id``; a task id ending in ``V`` is a V2 sandbox's task.
    """
    body = "".join(secrets.choice(_BASE62) for _ in range(length - len(last))) + last
    return f"{prefix}-{body}"


def fake_jwt(claims: dict[str, Any], lifetime: float = 3600.0) -> str:
    """A JWT-shaped token with an ``exp`` claim (the SDK reads it; nobody checks a signature)."""

    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    payload = {**claims, "exp": int(time.time() + lifetime), "nonce": secrets.token_hex(8)}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(payload)}.{secrets.token_urlsafe(16)}"


class Output:
    """One output stream of an exec: bytes so far, whether more can come, and a way to wait."""

    def __init__(self, keep: bool = True) -> None:
        self.data = bytearray()
        self.closed = False
        self.keep = keep  # False: DEVNULL, the data is dropped
        self._waiters: list[asyncio.Future[None]] = []

    def feed(self, data: bytes) -> None:
        if self.keep:
            self.data += data
            self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def changed(self) -> None:
        """Wait until more data comes or the stream closes."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter


@dataclass
class FakeApp:
    app_id: str
    name: str
    environment: str


@dataclass
class FakeVolume:
    volume_id: str
    name: str
    #: the Docker named volume that holds it
    docker_volume: str


@dataclass
class FakeImage:
    image_id: str
    #: the Docker image id of the built layer (or snapshot)
    docker_image: str
    #: the layer's content hash ("" for a snapshot)
    key: str = ""
    #: "" while the build runs; then success or the failure's text
    error: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    log: list[str] = field(default_factory=list)


@dataclass
class FakeExec:
    exec_id: str
    stdout: Output
    stderr: Output
    process: ExecProcess | None = None
    exit_code: int | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    stdin_offset: int = 0
    stdin_closed: bool = False
    stdin_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class FakeSandbox:
    sandbox_id: str
    task_id: str
    app_id: str
    #: 1: created through SandboxCreate (GPU requests); 2: through SandboxCreateV2
    version: int
    name: str
    tags: dict[str, str]
    image_id: str
    container_id: str
    created_at: float
    timeout: int
    #: the GPU the request asked for (``"A10G"``, ``"H100:2"``), realised as a CPU container
    gpu: str | None
    tunnels: list[api_pb2.TunnelData]
    #: the router tokens issued for this sandbox's task
    jwts: set[str] = field(default_factory=set, repr=False)
    #: the environment of its processes: ``env`` and secrets (never printed)
    env: dict[str, str] = field(default_factory=dict, repr=False)
    result: api_pb2.GenericResult | None = None
    terminated: bool = False
    execs: dict[str, FakeExec] = field(default_factory=dict)
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def deadline(self) -> float:
        return self.created_at + self.timeout

    def metadata(self) -> api_pb2.SandboxHandleMetadata:
        return api_pb2.SandboxHandleMetadata(app_id=self.app_id, result=self.result)


@dataclass
class FakeState:
    """Everything one fake control plane holds."""

    engine: DockerEngine
    router_url: str
    token_id: str
    token_secret: str
    builder_version: str
    apps: dict[str, FakeApp] = field(default_factory=dict)
    volumes: dict[str, FakeVolume] = field(default_factory=dict)
    #: secret id -> its variables; named secrets also in ``secret_names``
    secrets: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    secret_names: dict[str, str] = field(default_factory=dict)
    images: dict[str, FakeImage] = field(default_factory=dict)
    #: layer content hash -> image id, so one definition is one image
    image_keys: dict[str, str] = field(default_factory=dict)
    #: every layer definition received, as text (what a leak check searches)
    image_definitions: list[str] = field(default_factory=list)
    #: how many layers were really built (a cached layer builds nothing)
    layers_built: int = 0
    sandboxes: dict[str, FakeSandbox] = field(default_factory=dict)
    #: task id -> sandbox id
    tasks: dict[str, str] = field(default_factory=dict)
    #: file contents and mounts (``Image.add_local_dir``), and where blobs are uploaded to
    store: Any = None
    blobs: Any = None
    #: how many sandboxes one ``SandboxList`` page holds (the SDK pages until an empty one)
    list_page: int = 20
    #: seconds each ``TaskExecStdioRead`` message waits before it is sent: an exec's output
    #: reaching the client after its exit status, as two calls over a real network may
    stdio_lag: float = 0.0
    _last_created: float = 0.0

    def created_now(self) -> float:
        """A creation time later than every earlier one (``SandboxList`` pages by it)."""
        now = max(time.time(), self._last_created + 1e-6)
        self._last_created = now
        return now

    def app_named(self, name: str, environment: str) -> FakeApp | None:
        return next((a for a in self.apps.values() if a.name == name and a.environment == environment), None)

    def sandbox_for_task(self, task_id: str) -> FakeSandbox | None:
        sandbox_id = self.tasks.get(task_id)
        return self.sandboxes.get(sandbox_id) if sandbox_id else None

"""``FakeModal``: Modal's control plane and task command router on 127.0.0.1, for the real SDK.

The unmodified ``modal`` package talks gRPC to ``MODAL_SERVER_URL``; pointed at this server it
builds images, mounts volumes and runs sandboxes that are real containers on the local Docker
engine (see :mod:`~seer_modal.testing.engine`). Both services share one grpclib server: the
control plane hands out its own address as the router URL, and the SDK accepts a plain-http
router when the control plane is on loopback.

The fake records the name of every call it receives in order (:attr:`FakeModal.calls`), can
delay each call to stand in for a real network (:attr:`FakeModal.rpc_delay`) or an exec's output
behind its exit status (``state.stdio_lag``: two calls may be answered out of order), and answers
every call it does not implement with ``UNIMPLEMENTED`` naming the call, so an SDK upgrade that
starts using a new call fails at once, saying which.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from grpclib import GRPCError, Status

from seer_modal.testing.control_plane import ControlPlane
from seer_modal.testing.engine import DockerEngine, engine_problem
from seer_modal.testing.mounts import BlobServer, ContentStore
from seer_modal.testing.router import Router
from seer_modal.testing.state import FakeState

__all__ = ["BUILDER_VERSION", "DEFAULT_BASE_IMAGE", "LOCAL_PIP_OPTIONS", "FakeModal"]

log = logging.getLogger(__name__)

#: The local image every Modal registry image (``debian_slim``, ``from_registry``...) maps onto.
DEFAULT_BASE_IMAGE = os.environ.get("SEER_MODAL_FAKE_BASE_IMAGE", "seer-test-base:bookworm")
#: Options for ``uv pip install`` (seer-modal's ``provider_options["pip_options"]``) with which a
#: build on the local base image finds packages as its pip does: uv reads no pip configuration, so
#: name the wheels folder and package mirrors the base image carries, and use the system's
#: certificates (a TLS-intercepting proxy) for the rest.
LOCAL_PIP_OPTIONS = os.environ.get(
    "SEER_MODAL_FAKE_PIP_OPTIONS",
    "--system-certs --find-links /opt/wheels "
    "--extra-index-url file:///opt/pypi/simple --extra-index-url file:///opt/pypi-more/simple",
)
#: The image builder version the fake's environment announces (the SDK's newest stable one).
BUILDER_VERSION = "2026.10"


def _unimplemented(service: str, name: str) -> Callable[..., Any]:
    async def handler(self: Any, stream: Any) -> None:
        raise GRPCError(Status.UNIMPLEMENTED, f"the fake Modal server does not implement {service}.{name}")

    handler.__name__ = name
    return handler


def _complete(cls: type, service: str) -> type:
    """``cls`` with every call of its generated base it lacks answering ``UNIMPLEMENTED``."""
    missing = {name: _unimplemented(service, name) for name in getattr(cls, "__abstractmethods__", ())}
    return type(cls.__name__, (cls,), missing)


_ControlPlane = _complete(ControlPlane, "ModalClient")
_Router = _complete(Router, "TaskCommandRouter")


class _Recorded:
    """A servicer whose handlers record their call, apply the delay and turn crashes into errors."""

    def __init__(self, fake: FakeModal, servicer: Any, authorize: bool):
        self._fake = fake
        self._servicer = servicer
        self._authorize = authorize

    def __mapping__(self) -> dict[str, Any]:
        return {
            path: handler._replace(func=self._wrap(path.rsplit("/", 1)[1], handler.func))
            for path, handler in self._servicer.__mapping__().items()
        }

    def _wrap(self, name: str, func: Callable[[Any], Any]) -> Callable[[Any], Any]:
        fake = self._fake

        async def handler(stream: Any) -> None:
            fake.calls.append(name)
            if self._authorize:
                self._servicer.authorize(stream.metadata)
            if fake.rpc_delay:
                await asyncio.sleep(fake.rpc_delay)
            try:
                await func(stream)
            except (GRPCError, asyncio.CancelledError):
                raise
            except Exception as exc:
                log.exception("fake Modal: %s failed", name)
                raise GRPCError(
                    Status.INTERNAL, f"fake Modal: {name} failed: {type(exc).__name__}: {exc}"
                ) from exc

        return handler


class FakeModal:
    """A fake Modal control plane on a free port of 127.0.0.1, its sandboxes Docker containers.

    Use it as a context manager (or :meth:`start` / :meth:`close`); :meth:`activate` points the
    modal SDK of this process at it. On close it removes every container, volume and image it
    made. ``base_image``: the local image Modal's registry images map onto; ``rpc_delay``:
    seconds each call waits before it is handled; ``keep_layers``: leave the image layers it
    built on the engine, where any later fake finds them by content, as Modal keeps its layer
    cache (a test session's fakes build a torch image once, not once per worker or run).
    """

    def __init__(
        self, *, base_image: str = DEFAULT_BASE_IMAGE, rpc_delay: float = 0.0, keep_layers: bool = False
    ):
        self.base_image = base_image
        self.keep_layers = keep_layers
        #: seconds every call waits before it is handled (simulates a real network); settable
        self.rpc_delay = rpc_delay
        #: the name of every call received, in order (``"AppGetOrCreate"``, ``"TaskExecStart"``...)
        self.calls: list[str] = []
        self.token_id = f"ak-fake{secrets.token_hex(8)}"
        self.token_secret = f"as-fake{secrets.token_hex(16)}"
        self.instance = secrets.token_hex(6)
        self.port = 0
        self._state: FakeState | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Future[None] | None = None

    # --- what tests read -------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """What an SDK client needs to use this fake."""
        return {
            "MODAL_SERVER_URL": self.url,
            "MODAL_TOKEN_ID": self.token_id,
            "MODAL_TOKEN_SECRET": self.token_secret,
            "MODAL_DISABLE_API_PROXY": "1",
        }

    @property
    def state(self) -> FakeState:
        """Apps, images, volumes and sandboxes the fake holds (see :mod:`~seer_modal.testing.state`)."""
        if self._state is None:
            raise RuntimeError("the fake Modal server is not started")
        return self._state

    @property
    def layers_built(self) -> int:
        """How many image layers this fake really built (a layer cached on the engine, by this
        fake or an earlier one, builds nothing)."""
        return self.state.layers_built

    def call_counts(self) -> collections.Counter[str]:
        return collections.Counter(self.calls)

    def containers(self) -> list[Any]:
        """The Docker containers of this fake's sandboxes that still exist."""
        return self.state.engine.containers()

    def add_secret(self, name: str, env: dict[str, str]) -> str:
        """Create a named secret (``modal.Secret.from_name(name)`` finds it); return its id."""
        state = self.state

        def add() -> str:
            secret_id = f"st-fake{secrets.token_hex(8)}"
            state.secrets[secret_id] = dict(env)
            state.secret_names[name] = secret_id
            return secret_id

        return self._call_in_loop(add)

    # --- lifecycle -------------------------------------------------------------------------
    @staticmethod
    def problem(base_image: str = DEFAULT_BASE_IMAGE) -> str | None:
        """Why the fake cannot realise sandboxes here (no Docker engine, no base image), or None."""
        return engine_problem(base_image)

    def start(self) -> FakeModal:
        problem = engine_problem(self.base_image)
        if problem:
            raise RuntimeError(f"FakeModal needs a Docker engine: {problem}")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._state = FakeState(
            engine=DockerEngine(self.instance, self.base_image, keep_layers=self.keep_layers),
            router_url=self.url,
            token_id=self.token_id,
            token_secret=self.token_secret,
            builder_version=BUILDER_VERSION,
        )
        self._state.store = ContentStore()
        self._state.blobs = BlobServer(self._state.store)
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._serve, args=(sock, ready, failure), daemon=True, name="fake-modal-server"
        )
        self._thread.start()
        ready.wait(30)
        if failure or not ready.is_set():
            self.close()
            raise RuntimeError(f"the fake Modal server did not start: {failure[:1]}")
        return self

    def _serve(self, sock: socket.socket, ready: threading.Event, failure: list[BaseException]) -> None:
        from grpclib.server import Server

        loop = asyncio.new_event_loop()
        loop.set_default_executor(ThreadPoolExecutor(32, thread_name_prefix="fake-modal-io"))
        self._loop = loop
        state = self.state

        async def main() -> None:
            server = Server(
                [
                    _Recorded(self, _ControlPlane(state), authorize=True),
                    _Recorded(self, _Router(state), authorize=False),
                ]
            )
            await server.start(sock=sock)
            self._stop = loop.create_future()
            ready.set()
            await self._stop
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), timeout=5)

        try:
            loop.run_until_complete(main())
        except BaseException as exc:
            failure.append(exc)
            ready.set()
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    def _call_in_loop(self, fn: Callable[[], Any]) -> Any:
        if self._loop is None:
            raise RuntimeError("the fake Modal server is not started")
        return asyncio.run_coroutine_threadsafe(_call(fn), self._loop).result(10)

    def close(self) -> None:
        """Stop serving and remove every container, volume and image this fake made."""
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(_resolve, self._stop)
        if self._thread is not None:
            self._thread.join(15)
            self._thread = None
        if self._state is not None:
            self._state.engine.cleanup()
            if self._state.blobs is not None:
                self._state.blobs.close()
            if self._state.store is not None:
                self._state.store.close()

    def __enter__(self) -> FakeModal:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def activate(self) -> Iterator[dict[str, str]]:
        """Point this process's modal SDK at the fake: set :attr:`env`, and drop the SDK's cached
        ``Client.from_env()`` client on the way in and out (it holds a server address)."""
        saved = {key: os.environ.get(key) for key in self.env}
        os.environ.update(self.env)
        _forget_env_client()
        try:
            yield self.env
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            _forget_env_client()


async def _call(fn: Callable[[], Any]) -> Any:
    return fn()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _forget_env_client() -> None:
    """Drop the modal SDK's process-wide client (``modal.Client.from_env()`` caches one)."""
    with contextlib.suppress(ImportError, AttributeError):
        from modal.client import _Client

        _Client._client_from_env = None

"""The Docker side of the fake: each Modal object the fake makes is realised on a local engine.

A sandbox is a container (host networking, so a tunnel is the container's port on 127.0.0.1),
an image layer is a Docker image built from :func:`seer_modal.testing.layers.render_layer`, a
volume is a Docker named volume, a filesystem snapshot is ``docker commit``. Everything carries
the label ``seer.modal-fake=<instance>`` so one fake cleans up exactly what it made.

Layer images are tagged by their content hash, so a fake finds a layer another fake built on the
same engine, as Modal finds a layer any earlier build made. A fake that keeps its layers
(``keep_layers``) leaves them there for the next one, a test session's other worker or a later
run; a file lock per layer (:data:`LOCK_DIR`) makes two fakes that ask for the same layer at once
build it once.

Every call here blocks; the servicers run them in worker threads.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import shlex
import socket
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from seer.providers.kit import StreamFrames
from seer.testing import docker_engine

if TYPE_CHECKING:
    from docker import DockerClient

__all__ = ["FAKE_LABEL", "DockerEngine", "ExecProcess", "LayerBuildError", "engine_problem"]

#: Label on every container, image and volume a fake makes; its value is the fake's instance id.
FAKE_LABEL = "seer.modal-fake"
#: Repository of the layer images the fake builds (the tag is the layer's content hash).
LAYER_REPO = "seer-modal-fake"
#: Where fakes on this machine take a per-layer lock while building it (the engine is shared).
LOCK_DIR = Path(tempfile.gettempdir()) / "seer-modal-fake-layers"
#: Where the fake's helpers live inside each sandbox (Modal keeps its own tools there too).
BIN_DIR = "/__modal/.bin"
#: The sandbox's environment (secrets included) for its entrypoint; deleted as the sandbox starts.
ENV_FILE = "/__modal/.env"

#: The sandbox's main process (under Docker's init): load the environment file, delete it (so no
#: snapshot or ``docker inspect`` holds a secret), then run the entrypoint, or sleep, for at most
#: the sandbox's timeout. When it ends, so does the container, client or no client.
_INIT = f"""#!/bin/sh
t="$1"; shift
if [ -f {ENV_FILE} ]; then set -a; . {ENV_FILE}; set +a; rm -f {ENV_FILE}; fi
[ "$#" -gt 0 ] || exec sleep "$t"
exec timeout -k 2 "$t" "$@"
"""
#: The sandbox's init script, inside the container.
INIT_PATH = f"{BIN_DIR}/seer-fake-init"
#: The SDK's filesystem tool (see ``_fs_tools.py``), inside the container.
FS_TOOLS_PATH = f"{BIN_DIR}/modal-sandbox-fs-tools"


def _context(files: Mapping[str, tuple[bytes, int]], mount: Sequence[tuple[str, Path, int]]) -> IO[bytes]:
    """A layer's build context as a tar: in memory, or with a mount's files (``COPY . /`` of
    ``Image.add_local_dir``) in a temporary file (deleted when closed), the Dockerfile kept out of
    what ``COPY`` copies."""
    if not mount:
        return io.BytesIO(docker_engine.tar_archive(files))
    fh = tempfile.TemporaryFile(prefix="seer-modal-fake-context-")  # noqa: SIM115 - the caller closes it
    try:
        with tarfile.open(fileobj=fh, mode="w", format=tarfile.PAX_FORMAT) as tar:
            ignore = b"Dockerfile\n.dockerignore\n"
            for name, (data, mode) in {**files, ".dockerignore": (ignore, 0o644)}.items():
                info = tarfile.TarInfo(name.lstrip("/"))
                info.size, info.mode = len(data), mode
                tar.addfile(info, io.BytesIO(data))
            for name, source, mode in mount:
                info = tarfile.TarInfo(name.lstrip("/"))
                info.size, info.mode = source.stat().st_size, mode & 0o7777 or 0o644
                with open(source, "rb") as content:
                    tar.addfile(info, content)
        fh.seek(0)
    except BaseException:
        fh.close()
        raise
    return fh


class LayerBuildError(RuntimeError):
    """A layer's Docker build failed; the message ends with the tail of its log."""


def docker_client() -> DockerClient:
    """A client of the engine ``DOCKER_HOST`` (or the local socket) names, with room for many
    concurrent blocking calls (one ``wait`` per sandbox, one stream per exec)."""
    return docker_engine.docker_client("seer_modal.testing", "seer-modal[testing]", max_pool_size=64)


def engine_problem(base_image: str) -> str | None:
    """Why sandboxes cannot be realised here (no engine, or no local base image), or None."""
    return docker_engine.engine_problem(docker_client, base_image)


class ExecProcess:
    """One command run with the exec API, stdin attached, its output pumped by a thread.

    ``on_data(fd, data)`` gets each piece of output (fd 1 stdout, 2 stderr) as it comes;
    ``on_exit(code)`` is called once, after the last piece.
    """

    def __init__(
        self,
        client: DockerClient,
        container_id: str,
        argv: list[str],
        *,
        env: Mapping[str, str],
        workdir: str | None,
        on_data: Callable[[int, bytes], None],
        on_exit: Callable[[int], None],
    ):
        self._api = client.api
        self.id: str = self._api.exec_create(
            container_id, argv, stdin=True, environment=dict(env), workdir=workdir or None
        )["Id"]
        self._socket = self._api.exec_start(self.id, socket=True)
        self._raw: socket.socket = getattr(self._socket, "_sock", self._socket)
        self._on_data = on_data
        self._on_exit = on_exit
        self._stdin_lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True, name=f"fake-modal-exec-{self.id[:8]}").start()

    def write(self, data: bytes) -> None:
        """Send ``data`` to the command's stdin (ignored once the command is gone)."""
        with self._stdin_lock, contextlib.suppress(OSError):
            self._raw.sendall(data)

    def close_stdin(self) -> None:
        with self._stdin_lock, contextlib.suppress(OSError):
            self._raw.shutdown(socket.SHUT_WR)

    def _pump(self) -> None:
        """Forward the command's output until the engine ends the stream, then its exit status.

        The engine ends the stream once it has copied all of the command's output, which it may
        do after it already reports the command ended (under load by a second or more); when a
        background child holds the output open, it ends the stream itself, a couple of seconds
        after the command ended. So the end of the stream is the end of the output: nothing
        that arrives before it is dropped, and the exit status comes after the last of it."""
        frames = StreamFrames(self._on_data)
        raw = self._raw
        raw.settimeout(None)  # blocking: stdin's sendall (another thread) must not time out
        try:
            while data := raw.recv(1 << 16):
                frames.feed(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                raw.close()
            self._on_exit(self._exit_code())

    def _exit_code(self) -> int:
        """The command's exit status; 137 (killed) when its container is gone."""
        for _ in range(100):
            try:
                info = self._api.exec_inspect(self.id)
            except Exception:
                return 137
            if not info["Running"] and info["ExitCode"] is not None:
                return int(info["ExitCode"])
            time.sleep(0.02)
        return 137


class DockerEngine:
    """What one fake made on the engine, and how it makes more.

    ``keep_layers``: leave the layer images it built on the engine when it cleans up (for the
    next fake to find by content hash); its containers, volumes and snapshots go either way.
    """

    def __init__(self, instance: str, base_image: str, *, keep_layers: bool = False):
        self.instance = instance
        self.keep_layers = keep_layers
        self.client = docker_client()
        self.base_image_id: str = str(self.client.images.get(base_image).id)
        self._images: list[str] = []
        self._lock = threading.Lock()
        tools = (Path(__file__).with_name("_fs_tools.py")).read_bytes()
        self._bin = {INIT_PATH: (_INIT.encode(), 0o755), FS_TOOLS_PATH: (tools, 0o755)}

    @property
    def labels(self) -> dict[str, str]:
        return {FAKE_LABEL: self.instance}

    # --- images ------------------------------------------------------------------------------
    def find_layer(self, key: str) -> str | None:
        """The Docker image id of the layer with content hash ``key``, if the engine has it."""
        from docker.errors import ImageNotFound

        try:
            return str(self.client.images.get(f"{LAYER_REPO}:{key[:24]}").id)
        except ImageNotFound:
            return None

    def build_layer(
        self,
        key: str,
        dockerfile: str,
        context_files: Mapping[str, bytes],
        build_args: Mapping[str, str],
        mount: Sequence[tuple[str, Path, int]] = (),
    ) -> tuple[str, list[str]] | None:
        """Build one layer; return its Docker image id and the build's log lines, or None when
        another fake on this engine built it meanwhile (:meth:`find_layer` has it now).
        ``mount``: the files of its context mount (path in the context, where the content is,
        mode), streamed to the engine from a temporary file.

        Builds of one layer wait for each other, across processes: the first builds it, the
        others find it."""
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        with open(LOCK_DIR / f"{key[:24]}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if self.find_layer(key) is not None:
                    return None
                return self._build(key, dockerfile, context_files, build_args, mount)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _build(
        self,
        key: str,
        dockerfile: str,
        context_files: Mapping[str, bytes],
        build_args: Mapping[str, str],
        mount: Sequence[tuple[str, Path, int]],
    ) -> tuple[str, list[str]]:
        files = {name: (data, 0o644) for name, data in context_files.items()}
        files["Dockerfile"] = (dockerfile.encode(), 0o644)
        with _context(files, mount) as context:
            return self._build_from(key, context, build_args)

    def _build_from(
        self, key: str, context: IO[bytes], build_args: Mapping[str, str]
    ) -> tuple[str, list[str]]:
        tag = f"{LAYER_REPO}:{key[:24]}"
        log: list[str] = []
        stream = self.client.api.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            labels={**self.labels, "seer.modal-fake.layer": key},
            buildargs=dict(build_args) or None,
            network_mode="host",
            rm=True,
            forcerm=True,
            decode=True,
        )
        for chunk in stream:
            if "error" in chunk:
                tail = "".join(log[-30:]).rstrip()
                raise LayerBuildError(f"{chunk['error'].strip()}\n--- build log (tail) ---\n{tail}")
            text = chunk.get("stream") or chunk.get("status") or ""
            if text:
                log.append(text if text.endswith("\n") else text + "\n")
        image_id = self.find_layer(key)
        if image_id is None:
            raise LayerBuildError(f"the build of layer {key[:12]} left no image {tag}")
        if not self.keep_layers:
            with self._lock:
                self._images.append(image_id)
        return image_id, log

    def commit(self, container_id: str, snapshot_id: str) -> str:
        """``docker commit`` a sandbox's filesystem; return the new image's id."""
        container = self.client.containers.get(container_id)
        image = container.commit(
            repository=f"{LAYER_REPO}-snapshot",
            tag=snapshot_id.lower(),
            changes=[f"LABEL {FAKE_LABEL}={self.instance}"],
        )
        with self._lock:
            self._images.append(str(image.id))
        return str(image.id)

    # --- volumes ---------------------------------------------------------------------------
    def ensure_volume(self, name: str) -> None:
        from docker.errors import NotFound

        try:
            self.client.volumes.get(name)
        except NotFound:
            self.client.volumes.create(name, labels=self.labels)

    # --- sandboxes -------------------------------------------------------------------------
    def run(
        self,
        *,
        name: str,
        image: str,
        args: Iterable[str],
        timeout: int,
        env: Mapping[str, str],
        workdir: str | None,
        volumes: Mapping[str, tuple[str, bool]],
        labels: Mapping[str, str],
    ) -> str:
        """Create and start a sandbox container; return its id.

        ``volumes``: Docker volume name to (mount path, read only).
        """
        env_file = "".join(f"{key}={shlex.quote(value)}\n" for key, value in env.items())
        container = self.client.containers.create(
            image,
            entrypoint=[INIT_PATH],
            command=[str(int(timeout)), *args],
            name=name,
            labels={**self.labels, **labels},
            init=True,
            network_mode="host",
            working_dir=workdir or None,
            volumes={
                vol: {"bind": path, "mode": "ro" if ro else "rw"} for vol, (path, ro) in volumes.items()
            },
        )
        try:
            files = dict(self._bin)
            if env_file:
                files[ENV_FILE] = (env_file.encode(), 0o600)
            container.put_archive("/", docker_engine.tar_archive(files))
            container.start()
        except BaseException:
            self.remove(str(container.id))
            raise
        return str(container.id)

    def wait(self, container_id: str) -> int | None:
        """Block until the container exits; its exit status, or None if it is gone already."""
        from docker.errors import APIError

        try:
            return int(self.client.api.wait(container_id, timeout=None)["StatusCode"])
        except (APIError, KeyError, ValueError):
            return None

    def remove(self, container_id: str) -> None:
        """Kill and remove a container (idempotent)."""
        from docker.errors import APIError, NotFound

        with contextlib.suppress(NotFound):
            try:
                self.client.api.remove_container(container_id, force=True)
            except APIError as exc:
                if exc.status_code != 409:  # removal already in progress
                    raise

    def containers(self) -> list[Any]:
        """This fake's containers that still exist."""
        return list(
            self.client.containers.list(
                all=True, ignore_removed=True, filters={"label": f"{FAKE_LABEL}={self.instance}"}
            )
        )

    # --- teardown --------------------------------------------------------------------------
    def cleanup(self) -> None:
        """Remove every container, volume and image this fake made (its layers kept if
        ``keep_layers``)."""
        from docker.errors import APIError, NotFound

        for container in self.containers():
            with contextlib.suppress(APIError):
                self.remove(str(container.id))
        # A removal already under way (a sandbox that just ended) holds its image a moment longer.
        deadline = time.monotonic() + 10
        while self.containers() and time.monotonic() < deadline:
            time.sleep(0.2)
        for volume in self.client.volumes.list(filters={"label": f"{FAKE_LABEL}={self.instance}"}):
            with contextlib.suppress(NotFound, APIError):
                volume.remove(force=True)
        with self._lock:
            images, self._images = self._images[::-1], []
        for image_id in images:
            with contextlib.suppress(NotFound, APIError):
                self.client.images.remove(image_id, force=True)
        with contextlib.suppress(Exception):
            self.client.close()

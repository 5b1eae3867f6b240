"""The ``docker`` provider: a sandbox is a container on a Docker engine.

``create`` builds (or finds) the sandbox image (see :mod:`seer_docker.image`), then runs one
container from it:

* PID 1 is Docker's init running ``sleep <timeout>``: when the timeout passes it exits, and the
  container, started with auto-remove, is gone with everything it ran, client or no client;
* every container, image and volume seer makes carries the ``seer.managed`` label, and a
  container's labels hold all a client needs to find and use it again (name, deadline, workdir),
  so ``seer ls`` / ``seer down --all`` work from any process, even after the client crashed;
* the Hugging Face hub cache is a named volume (or a host folder) mounted into every sandbox, so a
  model downloads once per host; except in a sandbox with hidden models, which gets no shared
  cache at all (its models download into the container's own folder): the shared cache holds
  models under their names, and its blobs are named by the hash of their content, so an agent
  seeing it could identify the hidden model;
* secrets go to a file on a tmpfs in the container and reach commands through the exec API, never
  through the container's configuration (which ``docker inspect`` and ``docker commit`` keep).

Commands run through the exec API with their output demultiplexed from the attach socket as it
comes. A client-side deadline ends a command: every process carrying the command's marker
variable is killed, so ``timeout`` takes the whole tree. A small ledger in
``$SEER_HOME/docker/`` remembers sandboxes this client ended, to tell ``terminated`` from
``expired`` or ``lost`` once their container is gone.

Until ``Sandbox.start`` has finished, the ledger also names the client starting the sandbox, and a
small watcher on this host (:mod:`seer_docker._watch`) removes the container at once if that
client dies first: a half-made sandbox is listed as ``starting``, never left running unseen.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import json
import os
import posixpath
import secrets
import socket
import struct
import tarfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from seer.config import GPU_CATALOGUE, SandboxConfig
from seer.errors import (
    ConfigProblem,
    ExecTimeoutError,
    SandboxError,
    SandboxNotFoundError,
    SandboxNotRunningError,
)
from seer.ids import check_sandbox_id
from seer.providers.base import (
    Availability,
    Capabilities,
    Command,
    ExecResult,
    Machine,
    MachineInfo,
    MachineSpec,
    MachineStatus,
    OutputCallback,
    ProcessInfo,
    Provider,
    Snapshot,
    command_text,
)
from seer.providers.starter import starter_alive, starter_info
from seer.state import RECORD_TTL, private_dir, read_json, seer_home, write_json

from seer_docker import _shell
from seer_docker.image import HF_MOUNT, IMAGE_REPO, LABEL, build_repo_image, ensure_image, resolve_base
from seer_docker.options import DockerOptions

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

__all__ = ["DockerMachine", "DockerProvider"]

#: Label holding a container's sandbox id (only sandbox containers carry it).
SANDBOX_LABEL = "seer.sandbox"
#: The variable marking every process of one exec, for killing its tree on timeout.
EXEC_MARK = "SEER_EXEC_ID"
#: Container states that count as a running sandbox.
_ALIVE_STATES = ("running", "created", "restarting")
#: Slack when deciding whether a vanished container had reached its deadline.
EXPIRY_SLACK = 5.0

_client_lock = threading.Lock()
_clients: dict[str, DockerClient] = {}


def docker_client() -> DockerClient:
    """One client per engine address (``DOCKER_HOST`` or the local socket), made on first use."""
    import docker

    key = os.environ.get("DOCKER_HOST", "")
    with _client_lock:
        client = _clients.get(key)
        if client is None:
            client = docker.from_env(timeout=300)
            _clients[key] = client
        return client


def _ledger_dir() -> Path:
    return private_dir(seer_home() / "docker" / "sandboxes")


def _ledger_read(sandbox_id: str) -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):
        return read_json(_ledger_dir() / f"{sandbox_id}.json")
    return None


def _ledger_update(sandbox_id: str, **changes: Any) -> None:
    record = _ledger_read(sandbox_id) or {"id": sandbox_id}
    record.update(changes)
    write_json(_ledger_dir() / f"{sandbox_id}.json", record)


def _ended_status(record: Mapping[str, Any] | None, expires_at: float | None) -> MachineStatus:
    """The status of a sandbox whose container is gone."""
    if record and record.get("status") and record["status"] != MachineStatus.RUNNING.value:
        return MachineStatus(record["status"])
    deadline = expires_at if expires_at is not None else (record or {}).get("expires_at")
    if deadline is not None and time.time() >= float(deadline) - EXPIRY_SLACK:
        return MachineStatus.EXPIRED
    return MachineStatus.LOST


def _settle(sandbox_id: str, record: dict[str, Any] | None, expires_at: float | None) -> MachineStatus:
    """The status of a sandbox whose container is gone, written into its ledger ``record`` (in
    place, and on disk) the first time it is known, with when that was."""
    status = _ended_status(record, expires_at)
    if record is not None and record.get("status") != status.value:
        record.update(status=status.value, ended_at=time.time())
        write_json(_ledger_dir() / f"{sandbox_id}.json", record)
    return status


def _valid_id(sandbox_id: str) -> bool:
    """Whether an id read from the engine or the disk has the docker provider's form."""
    try:
        check_sandbox_id(sandbox_id, DockerProvider)
    except SandboxNotFoundError:
        return False
    return True


def _watch_starter(sandbox_id: str) -> None:
    """Start the watcher that ends the sandbox if this client dies before ``start()`` finishes
    (:mod:`seer_docker._watch`); it outlives this process, in a session of its own."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "seer_docker._watch", sandbox_id],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    # reaped when it ends (soon after start() finishes), not left a zombie of this client
    threading.Thread(target=proc.wait, name="seer-docker-watch-reaper", daemon=True).start()


def _is_local_engine() -> bool:
    host = os.environ.get("DOCKER_HOST", "")
    return not host or host.startswith("unix://")


class _Frames:
    """Demultiplexes the exec attach stream: 8-byte headers (stream, 0, 0, 0, size) + payload."""

    def __init__(self, on_data: Any):
        self._buf = bytearray()
        self._on_data = on_data

    def feed(self, data: bytes) -> None:
        self._buf += data
        while len(self._buf) >= 8:
            kind, size = struct.unpack(">BxxxL", self._buf[:8])
            if len(self._buf) < 8 + size:
                return
            payload = bytes(self._buf[8 : 8 + size])
            del self._buf[: 8 + size]
            self._on_data(kind, payload)


class DockerMachine(Machine):
    """A handle on one sandbox container."""

    def __init__(self, client: DockerClient, container_id: str, labels: Mapping[str, str], secrets_env: Any):
        self._client = client
        self._api = client.api
        self.id = labels[SANDBOX_LABEL]
        self._cid = container_id
        self.workdir = labels["seer.workdir"]
        self.python = labels["seer.python"]
        self.packages_installed = True
        self._labels = dict(labels)
        #: secrets: a dict, or None to read them from the container on first use
        self._secrets: dict[str, str] | None = secrets_env

    # --- helpers ----------------------------------------------------------------------------
    def _not_running(self) -> SandboxNotRunningError:
        return SandboxNotRunningError(f"sandbox {self.id} is {self.status().value}")

    def _guard(self, exc: Exception) -> None:
        """Re-raise a Docker API error as SandboxNotRunningError when the container is gone."""
        from docker.errors import APIError, NotFound

        if isinstance(exc, NotFound) and "container" in str(exc).lower():
            raise self._not_running() from None
        if isinstance(exc, APIError) and exc.status_code == 409:
            raise self._not_running() from None
        if isinstance(exc, APIError) and self.status() is not MachineStatus.RUNNING:
            raise self._not_running() from None

    def _secret_env(self) -> dict[str, str]:
        if self._secrets is None:
            result = self._exec_raw(["cat", _shell.SECRETS_FILE], env={}, cwd=None, stdin=None)
            self._secrets = json.loads(result.stdout) if result.ok and result.stdout.strip() else {}
        return self._secrets

    # --- commands -------------------------------------------------------------------------
    def exec(
        self,
        command: Command,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        # argv goes through env(1), so a missing program answers 127 as a shell would.
        argv = ["bash", "-c", command] if isinstance(command, str) else ["env", "--", *command]
        return self._exec_raw(
            argv,
            env={**self._secret_env(), **(env or {})},
            cwd=self.resolve(cwd) if cwd else self.workdir,
            stdin=stdin,
            on_output=on_output,
            timeout=timeout,
            text=command_text(command),
        )

    def _exec_raw(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        cwd: str | None,
        stdin: bytes | None,
        on_output: OutputCallback | None = None,
        timeout: float | None = None,
        text: str | None = None,
    ) -> ExecResult:
        from docker.errors import APIError

        text = text or command_text(argv)
        started = time.monotonic()
        token = secrets.token_hex(8)
        try:
            exec_id = self._api.exec_create(
                self._cid,
                argv,
                stdin=stdin is not None,
                environment={**env, EXEC_MARK: token},
                workdir=cwd,
            )["Id"]
            sock = self._api.exec_start(exec_id, socket=True)
        except APIError as exc:
            self._guard(exc)
            raise SandboxError(f"exec in sandbox {self.id} failed: {exc.explanation or exc}") from None
        raw: socket.socket = getattr(sock, "_sock", sock)
        chunks: dict[str, list[str]] = {"stdout": [], "stderr": []}
        decoders = {name: codecs.getincrementaldecoder("utf-8")(errors="replace") for name in chunks}

        def on_data(kind: int, payload: bytes) -> None:
            name = "stderr" if kind == 2 else "stdout"
            piece = decoders[name].decode(payload)
            if piece:
                chunks[name].append(piece)
                if on_output is not None:
                    on_output(name, piece)

        frames = _Frames(on_data)
        if stdin is not None:

            def feed() -> None:
                with contextlib.suppress(OSError):
                    raw.sendall(stdin)
                with contextlib.suppress(OSError):
                    raw.shutdown(socket.SHUT_WR)

            threading.Thread(target=feed, daemon=True, name="seer-docker-stdin").start()
        deadline = None if timeout is None else started + timeout
        timed_out = False
        idle_since = time.monotonic()
        try:
            while True:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    timed_out = True
                    break
                raw.settimeout(min(1.0, deadline - now) if deadline is not None else 1.0)
                try:
                    data = raw.recv(65536)
                except TimeoutError:
                    # Quiet for a while: a background child may hold the stream open after the
                    # command itself ended. Don't wait on it for long (as the local provider).
                    if time.monotonic() - idle_since > 1.0 and not self._exec_running(exec_id):
                        self._drain(raw, frames, 2.0)
                        break
                    continue
                if not data:
                    break
                idle_since = time.monotonic()
                frames.feed(data)
        except BaseException:
            self._kill_marked(token)
            with contextlib.suppress(OSError):
                raw.close()
            raise
        if timed_out:
            self._kill_marked(token)
            self._drain(raw, frames, 5.0)
        with contextlib.suppress(OSError):
            raw.close()
        for name, decoder in decoders.items():
            tail = decoder.decode(b"", final=True)
            if tail:
                chunks[name].append(tail)
        stdout, stderr = "".join(chunks["stdout"]), "".join(chunks["stderr"])
        if timed_out:
            raise ExecTimeoutError(text, timeout or 0, stdout, stderr)
        return ExecResult(text, self._exit_code(exec_id), stdout, stderr, time.monotonic() - started)

    @staticmethod
    def _drain(raw: socket.socket, frames: _Frames, limit: float) -> None:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            raw.settimeout(max(0.05, end - time.monotonic()))
            try:
                data = raw.recv(65536)
            except (TimeoutError, OSError):
                return
            if not data:
                return
            frames.feed(data)

    def _exec_running(self, exec_id: str) -> bool:
        with contextlib.suppress(Exception):
            return bool(self._api.exec_inspect(exec_id)["Running"])
        return False

    def _exit_code(self, exec_id: str) -> int:
        for _ in range(100):
            info = self._api.exec_inspect(exec_id)
            if not info["Running"] and info["ExitCode"] is not None:
                return int(info["ExitCode"])
            time.sleep(0.02)
        raise SandboxError(f"sandbox {self.id}: a command's exit code never came")

    def _kill_marked(self, token: str) -> None:
        with contextlib.suppress(Exception):
            self._exec_raw(
                ["bash", "-c", _shell.KILL_MARKED, "seer", EXEC_MARK, token], env={}, cwd=None, stdin=None
            )

    def _helper(
        self, snippet: str, *args: str, env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> ExecResult:
        return self._exec_raw(["bash", "-c", snippet, "seer", *args], env=env or {}, cwd=cwd, stdin=None)

    def start_process(
        self,
        command: Command,
        *,
        name: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ProcessInfo:
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        log = self.log_path(name)
        result = self._helper(
            _shell.START,
            name,
            log,
            *argv,
            env={**self._secret_env(), **(env or {})},
            cwd=self.resolve(cwd) if cwd else self.workdir,
        )
        if result.exit_code == 17:
            raise ValueError(f"a process named {name!r} is already running in sandbox {self.id}")
        if not result.ok:
            raise SandboxError(
                f"could not start process {name!r} in sandbox {self.id}: {result.output.strip()}"
            )
        return ProcessInfo(name, int(result.stdout.split()[-1]), command_text(command), log)

    def process_running(self, name: str) -> bool:
        try:
            return self._helper(_shell.RUNNING, name).ok
        except SandboxNotRunningError:
            return False

    def stop_process(self, name: str, *, grace: float = 5.0) -> None:
        with contextlib.suppress(SandboxNotRunningError):
            self._helper(_shell.STOP, name, f"{grace:g}")

    # --- files ----------------------------------------------------------------------------
    def write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        target = self.resolve(path)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(target.lstrip("/"))
            info.size = len(data)
            info.mode = 0o644 if mode is None else mode
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
        self._put_archive(buf.getvalue())

    def _put_archive(self, data: bytes) -> None:
        from docker.errors import APIError

        try:
            self._api.put_archive(self._cid, "/", data)
        except APIError as exc:
            self._guard(exc)
            raise SandboxError(f"could not write into sandbox {self.id}: {exc.explanation or exc}") from None

    def _get_archive(self, path: str) -> bytes:
        from docker.errors import APIError, NotFound

        try:
            stream, _stat = self._api.get_archive(self._cid, path)
            return b"".join(stream)
        except NotFound as exc:
            if "no such container" in str(exc).lower():
                raise self._not_running() from None
            raise FileNotFoundError(f"{path} (in sandbox {self.id})") from None
        except APIError as exc:
            self._guard(exc)
            raise SandboxError(f"could not read from sandbox {self.id}: {exc.explanation or exc}") from None

    def read_bytes(self, path: str) -> bytes:
        target = self.resolve(path)
        with tarfile.open(fileobj=io.BytesIO(self._get_archive(target))) as tar:
            member = tar.next()
            if member is None:
                raise FileNotFoundError(target)
            if member.isdir():
                raise IsADirectoryError(target)
            fh = tar.extractfile(member)
            if fh is None:  # a link: read what it points at
                return self.read_bytes(posixpath.join(posixpath.dirname(target), member.linkname))
            return fh.read()

    def put_dir(self, local_dir: str | Path, remote_dir: str) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(local_dir), arcname=self.resolve(remote_dir).lstrip("/"))
        self._put_archive(buf.getvalue())

    def get_dir(self, remote_dir: str, local_dir: str | Path) -> None:
        data = self._get_archive(self.resolve(remote_dir).rstrip("/") + "/.")
        dest = Path(local_dir)
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            members = []
            for member in tar.getmembers():
                # the archive's entries sit under a top folder named after remote_dir
                _top, _, rest = member.name.partition("/")
                if not rest:
                    continue
                member.name = rest
                members.append(member)
            tar.extractall(dest, members=members, filter="data")

    def model_cache_dir(self) -> str:
        return HF_MOUNT

    # --- network and state ----------------------------------------------------------------
    def expose_port(self, port: int) -> str:
        # Host networking: the container's 127.0.0.1 is the host's.
        return f"http://127.0.0.1:{int(port)}"

    def snapshot(self, description: str = "") -> Snapshot:
        from docker.errors import APIError, NotFound

        snap_id = f"snap-{secrets.token_hex(6)}"
        tag = f"snapshot-{snap_id[5:]}"
        try:
            container = self._client.containers.get(self._cid)
            # Process records and secrets live on a tmpfs, which a commit does not keep.
            image = container.commit(
                repository=IMAGE_REPO,
                tag=tag,
                message=description or None,
                changes=[f"LABEL {LABEL}=snapshot seer.snapshot={snap_id}"],
            )
        except NotFound:
            raise self._not_running() from None
        except APIError as exc:
            self._guard(exc)
            raise SandboxError(f"could not snapshot sandbox {self.id}: {exc.explanation or exc}") from None
        return Snapshot(
            "docker",
            snap_id,
            description,
            time.time(),
            self.id,
            {"image": f"{IMAGE_REPO}:{tag}", "image_id": image.id, "workdir": self.workdir},
        )

    def status(self) -> MachineStatus:
        from docker.errors import NotFound

        try:
            container = self._client.containers.get(self._cid)
        except NotFound:
            container = None
        if container is not None and container.status in _ALIVE_STATES:
            return MachineStatus.RUNNING
        expires_at = float(self._labels.get("seer.expires_at", "0")) or None
        return _settle(self.id, _ledger_read(self.id), expires_at)

    def start_completed(self) -> None:
        # The watcher sees the starter gone from the ledger and leaves the sandbox to its timeout.
        if _ledger_read(self.id) is not None:
            _ledger_update(self.id, starter=None)


class DockerProvider(Provider):
    """Sandboxes as containers on a Docker engine (the local one, or ``DOCKER_HOST``)."""

    name: ClassVar[str] = "docker"
    id_pattern: ClassVar[str] = r"docker-[0-9a-f]{10}"
    description: ClassVar[str] = "containers on a Docker engine: images built from the config and cached"
    capabilities: ClassVar[Capabilities] = Capabilities(
        gpu_types=frozenset(GPU_CATALOGUE),
        max_gpu_count=16,
        snapshots=True,
        volumes=True,
        port_exposure="loopback",
        max_lifetime=None,
        installs_system_packages=True,
        hides_models=True,
        dockerfile_repos=True,
    )
    options_model = DockerOptions

    @classmethod
    def availability(cls) -> Availability:
        try:
            import docker  # noqa: F401
        except ImportError:
            return Availability(False, "the Docker SDK is not installed (pip install 'seer[docker]')")
        try:
            docker_client().ping()
        except Exception as exc:
            where = os.environ.get("DOCKER_HOST") or "the local socket"
            return Availability(False, f"no Docker engine answers at {where}: {type(exc).__name__}: {exc}")
        return Availability(True)

    @classmethod
    def check_config(cls, config: SandboxConfig) -> list[ConfigProblem]:
        problems = super().check_config(config)
        with_dockerfile = [i for i, r in enumerate(config.repos) if r.dockerfile]
        for i in with_dockerfile[1:]:
            problems.append(
                ConfigProblem(
                    f"repos[{i}].dockerfile",
                    f"only one repo may give the image's Dockerfile; repos[{with_dockerfile[0]}] "
                    "already does",
                )
            )
        gpu_problem = any(p.field.startswith("gpu") or p.field == "provider" for p in problems)
        if config.gpu is not None and not gpu_problem and _is_local_engine():
            from seer.providers.local import detect_gpus

            if not detect_gpus():
                problems.append(
                    ConfigProblem(
                        "gpu",
                        f"gpu={config.gpu!r} asked for, but this Docker host has no NVIDIA GPU "
                        "(nvidia-smi finds none); use gpu=None for a CPU sandbox",
                    )
                )
        return problems

    # --- lifecycle ------------------------------------------------------------------------
    def create(self, spec: MachineSpec) -> Machine:
        options: DockerOptions = spec.options or DockerOptions()
        client = docker_client()
        log = spec.report
        tag = self._image(client, spec, options, log)
        sandbox_id = f"docker-{secrets.token_hex(5)}"
        try:
            return self._run(client, sandbox_id, tag, spec, options)
        except BaseException:
            self._remove(client, sandbox_id)
            with contextlib.suppress(OSError):
                (_ledger_dir() / f"{sandbox_id}.json").unlink()
            raise

    def _image(self, client: DockerClient, spec: MachineSpec, options: DockerOptions, log: Any) -> str:
        if spec.snapshot is not None:
            ref = spec.snapshot.data.get("image")
            if not ref:
                raise SandboxNotFoundError(f"snapshot {spec.snapshot.id} names no image")
            try:
                base_id = resolve_base(client, ref, pull=False, log=log)
            except SandboxError:
                raise SandboxNotFoundError(
                    f"snapshot {spec.snapshot.id}: its image {ref} is not on this Docker engine"
                ) from None
        else:
            repo = next((r for r in spec.repos if r.dockerfile), None)
            if repo is not None:
                base = options.image if "image" in options.model_fields_set else None
                if base is not None:
                    resolve_base(client, base, pull=options.pull, log=log)
                base_id = build_repo_image(client, repo, base=base, log=log)
            else:
                base_id = resolve_base(client, options.image, pull=options.pull, log=log)
        # core clones remote repos inside the sandbox: make sure git is there (slim images lack it)
        remote = any(not r.clone_url.startswith(("/", "file://")) for r in spec.repos)
        tag, _built = ensure_image(
            client,
            base_id=base_id,
            system_packages=spec.system_packages,
            needs_git=remote,
            python_packages=spec.python_packages,
            workdir=options.workdir,
            log=log,
        )
        return tag

    def _model_mount(
        self, client: DockerClient, options: DockerOptions, spec: MachineSpec
    ) -> dict[str, dict[str, str]]:
        """The shared model cache's mount, or none when the sandbox must have a cache of its own
        (``spec.private_model_cache``: it has hidden models): what is not mounted, the agent
        cannot list, hash or link against."""
        from docker.errors import NotFound

        if spec.private_model_cache:
            return {}
        if options.model_cache != "volume":
            Path(options.model_cache).mkdir(parents=True, exist_ok=True)
            return {options.model_cache: {"bind": HF_MOUNT, "mode": "rw"}}
        try:
            client.volumes.get(options.model_volume)
        except NotFound:
            client.volumes.create(options.model_volume, labels={LABEL: "model-cache"})
        return {options.model_volume: {"bind": HF_MOUNT, "mode": "rw"}}

    def _run(
        self, client: DockerClient, sandbox_id: str, tag: str, spec: MachineSpec, options: DockerOptions
    ) -> DockerMachine:
        from docker.types import DeviceRequest

        now = time.time()
        labels = {
            **spec.labels,
            LABEL: "sandbox",
            SANDBOX_LABEL: sandbox_id,
            "seer.name": spec.name,
            "seer.created_at": f"{now:.3f}",
            "seer.expires_at": f"{now + spec.timeout:.3f}",
            "seer.timeout": str(spec.timeout),
            "seer.workdir": options.workdir,
            "seer.python": "/opt/seer/venv/bin/python",
            "seer.image": tag,
            "seer.model_cache": "private" if spec.private_model_cache else "shared",
        }
        env = {**spec.env, "SEER_WORKDIR": options.workdir, "SEER_SANDBOX_ID": sandbox_id}
        _ledger_update(
            sandbox_id,
            name=spec.name,
            status=MachineStatus.RUNNING.value,
            created_at=now,
            expires_at=now + spec.timeout,
            labels=spec.labels,
            workdir=options.workdir,
            starter=starter_info(),
        )
        _watch_starter(sandbox_id)
        kwargs: dict[str, Any] = {}
        if spec.gpu is not None:
            kwargs["device_requests"] = [DeviceRequest(count=spec.gpu_count, capabilities=[["gpu"]])]
        if options.shm_size:
            kwargs["shm_size"] = options.shm_size
        container: Container = client.containers.run(
            tag,
            # Docker's init as PID 1 reaps orphans; when sleep ends, so does the container.
            entrypoint=["sleep", str(int(spec.timeout))],
            command=[],
            name=sandbox_id,
            hostname=sandbox_id,
            labels=labels,
            environment=env,
            detach=True,
            auto_remove=True,
            init=True,
            network_mode=options.network,
            volumes=self._model_mount(client, options, spec),
            tmpfs={_shell.RUN_DIR: "mode=0700"},
            working_dir=options.workdir,
            **kwargs,
        )
        machine = DockerMachine(client, container.id, labels, dict(spec.secrets))
        # Secrets to the tmpfs (for handles attached later); commands get them through exec.
        machine._exec_raw(
            ["bash", "-c", f"umask 077 && mkdir -p {_shell.PROCS_DIR} && cat > {_shell.SECRETS_FILE}"],
            env={},
            cwd=None,
            stdin=json.dumps(spec.secrets).encode(),
        ).check()
        if spec.snapshot is not None:
            # what core keeps under <workdir>/.seer (logs, service state) belongs to the old sandbox
            machine._exec_raw(
                ["rm", "-rf", posixpath.join(options.workdir, ".seer")], env={}, cwd=None, stdin=None
            )
        return machine

    @staticmethod
    def _remove(client: DockerClient, sandbox_id: str) -> None:
        from docker.errors import APIError, NotFound

        with contextlib.suppress(NotFound):
            try:
                client.api.remove_container(sandbox_id, force=True)
            except APIError as exc:
                # "removal already in progress" (auto-remove after the timeout): it goes anyway
                if exc.status_code != 409:
                    raise

    @staticmethod
    def _containers(client: DockerClient, label: str) -> list[dict[str, Any]]:
        """Summaries (``Id``, ``Labels``, ``State``) of the containers carrying ``label``: one
        call, with no per-container inspect that a container removed meanwhile would fail."""
        return list(client.api.containers(all=True, filters={"label": label}))

    def _find(self, client: DockerClient, sandbox_id: str) -> dict[str, Any] | None:
        found = self._containers(client, f"{SANDBOX_LABEL}={sandbox_id}")
        return found[0] if found else None

    def attach(self, machine_id: str) -> Machine:
        check_sandbox_id(machine_id, DockerProvider)
        client = docker_client()
        container = self._find(client, machine_id)
        if container is not None:
            return DockerMachine(client, container["Id"], container["Labels"], None)
        record = _ledger_read(machine_id)
        if record is None:
            raise SandboxNotFoundError(f"no docker sandbox {machine_id!r}")
        labels = {
            SANDBOX_LABEL: machine_id,
            "seer.workdir": record.get("workdir", "/workspace"),
            "seer.python": "/opt/seer/venv/bin/python",
            "seer.expires_at": str(record.get("expires_at", 0)),
        }
        return DockerMachine(client, machine_id, labels, {})

    def list(self) -> list[MachineInfo]:
        client = docker_client()
        out: dict[str, MachineInfo] = {}
        for container in self._containers(client, SANDBOX_LABEL):
            labels = container["Labels"]
            sandbox_id = labels[SANDBOX_LABEL]
            if not _valid_id(sandbox_id):
                continue  # a container labelled by someone else: not a sandbox of ours
            expires_at = float(labels.get("seer.expires_at", "0")) or None
            if container["State"] in _ALIVE_STATES:
                record = _ledger_read(sandbox_id) or {}
                starting = record.get("starter") and starter_alive(record["starter"])
                status = MachineStatus.STARTING if starting else MachineStatus.RUNNING
            else:
                status = _ended_status(_ledger_read(sandbox_id), expires_at)
            out[sandbox_id] = MachineInfo(
                sandbox_id,
                self.name,
                labels.get("seer.name", sandbox_id),
                status,
                float(labels.get("seer.created_at", "0")),
                expires_at,
                {k: v for k, v in labels.items() if k.startswith("seer.")},
            )
        ledger = _ledger_dir()
        for path in sorted(ledger.glob("*.json")) if ledger.is_dir() else []:
            sandbox_id = path.stem
            if sandbox_id in out or not _valid_id(sandbox_id):
                continue
            record = _ledger_read(sandbox_id)
            if record is None or "created_at" not in record:
                continue
            status = _settle(sandbox_id, record, record.get("expires_at"))
            if time.time() - float(record.get("ended_at", time.time())) > RECORD_TTL:
                path.unlink(missing_ok=True)
                continue
            out[sandbox_id] = MachineInfo(
                sandbox_id,
                self.name,
                record.get("name", sandbox_id),
                status,
                float(record["created_at"]),
                record.get("expires_at"),
                record.get("labels", {}),
            )
        return sorted(out.values(), key=lambda m: m.created_at)

    def terminate(self, machine_id: str) -> None:
        check_sandbox_id(machine_id, DockerProvider)
        client = docker_client()
        record = _ledger_read(machine_id)
        if record is not None and record.get("status") in (None, MachineStatus.RUNNING.value):
            _ledger_update(machine_id, status=MachineStatus.TERMINATED.value, ended_at=time.time())
        container = self._find(client, machine_id)
        if container is not None:
            self._remove(client, container["Id"])

    def delete_snapshot(self, snapshot: Snapshot) -> None:
        """Remove the snapshot's image and the sandbox images built on it (they carry its label,
        inherited from it). One a running sandbox still uses is left to a later prune."""
        from docker.errors import APIError, ImageNotFound

        client = docker_client()
        images = client.images.list(filters={"label": f"seer.snapshot={snapshot.id}"})
        # children before their parent, or the engine refuses
        for image in sorted(images, key=lambda i: i.attrs.get("Created", ""), reverse=True):
            for ref in [*image.tags, image.id]:
                with contextlib.suppress(ImageNotFound):
                    try:
                        client.images.remove(ref)
                    except APIError as exc:
                        if exc.status_code != 409:  # in use, or has children in use
                            raise

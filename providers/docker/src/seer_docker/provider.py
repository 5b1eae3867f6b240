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

The machine is built on the provider kit (:mod:`seer.providers.kit`): what is Docker's own here
is running a command through the exec API (its output demultiplexed from the attach socket into
the kit's output pump) and moving tar streams with the archive API; the kit does the rest
(deadlines that kill a command's whole tree, background processes, files). Background processes'
records live on a tmpfs (``/run/seer``), which a snapshot does not keep. The kit's ledger in
``$SEER_HOME/docker/sandboxes/`` remembers sandboxes this client made and ended, to tell
``terminated`` from ``expired`` or ``lost`` once their container is gone; until ``Sandbox.start``
has finished it names the client starting the sandbox, and the kit's starter watch removes the
container at once if that client dies first: a half-made sandbox is listed as ``starting``,
never left running unseen.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import posixpath
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from seer.config import GPU_CATALOGUE, SandboxConfig
from seer.errors import ConfigProblem, SandboxError, SandboxNotFoundError
from seer.ids import check_sandbox_id
from seer.providers.base import (
    Availability,
    Capabilities,
    Machine,
    MachineInfo,
    MachineSpec,
    MachineStatus,
    Provider,
    Snapshot,
)
from seer.providers.kit import ExecMachine, Ledger, OutputPump, StreamFrames, detect_gpus
from seer.providers.kit.frames import STDERR

from seer_docker.image import (
    HF_MOUNT,
    IMAGE_REPO,
    LABEL,
    TOOLS_DIR,
    PackageSources,
    build_repo_image,
    ensure_image,
    forget_image,
    resolve_base,
)
from seer_docker.options import DockerOptions

if TYPE_CHECKING:
    from docker import DockerClient

__all__ = ["DockerMachine", "DockerProvider"]

#: Label holding a container's sandbox id (only sandbox containers carry it).
SANDBOX_LABEL = "seer.sandbox"
#: Where process records (and the secrets file) live in the container: a tmpfs, mode 0700.
RUN_DIR = "/run/seer"
SECRETS_FILE = f"{RUN_DIR}/secrets.json"
#: Container states that count as a running sandbox.
_ALIVE_STATES = ("running", "created", "restarting")

_client_lock = threading.Lock()
_clients: dict[str, DockerClient] = {}
#: The containers this process made, by (engine, sandbox id): the engine's id of each. That id is
#: the engine's own random 64-hex name, never reused, and the create that returned it set seer's
#: labels on the container, so ``terminate`` removes it by that id without first listing
#: containers by label; a sandbox this process did not make is still found by its label (only
#: a container of seer's is ever removed).
_made: dict[tuple[str, str], str] = {}
#: Container ids this process removed: a status asked after ``terminate`` needs no engine call.
_removed: set[str] = set()


def _engine() -> str:
    return os.environ.get("DOCKER_HOST", "")


def docker_client() -> DockerClient:
    """One client per engine address (``DOCKER_HOST`` or the local socket), made on first use."""
    import docker

    key = _engine()
    with _client_lock:
        client = _clients.get(key)
        if client is None:
            client = docker.from_env(timeout=300)
            if _is_local_engine():
                # No proxy, netrc or CA bundle applies to a unix socket: without this, requests
                # reads every proxy variable of the environment again on each engine call.
                client.api.trust_env = False
            _clients[key] = client
        return client


def _is_local_engine() -> bool:
    host = os.environ.get("DOCKER_HOST", "")
    return not host or host.startswith("unix://")


class DockerMachine(ExecMachine):
    """A handle on one sandbox container."""

    procs_dir = f"{RUN_DIR}/procs"

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

    def _guard(self, exc: Exception) -> None:
        """Re-raise a Docker API error as SandboxNotRunningError when the container is gone."""
        from docker.errors import APIError, NotFound

        if isinstance(exc, NotFound) and "container" in str(exc).lower():
            raise self.not_running() from None
        if isinstance(exc, APIError) and exc.status_code == 409:
            raise self.not_running() from None
        if isinstance(exc, APIError) and self.status() is not MachineStatus.RUNNING:
            raise self.not_running() from None

    def command_env(self) -> dict[str, str]:
        # the secrets, read from the container's tmpfs by a handle that did not make it
        if self._secrets is None:
            code, pump = self.run_pumped(["cat", SECRETS_FILE])
            out = pump.text("stdout")
            self._secrets = json.loads(out) if code == 0 and out.strip() else {}
        return self._secrets

    # --- what the kit runs on ---------------------------------------------------------------
    def run(
        self, argv: list[str], *, env: Mapping[str, str], cwd: str, stdin: bytes | None, pump: OutputPump
    ) -> int:
        from docker.errors import APIError

        try:
            exec_id = self._api.exec_create(
                self._cid, argv, stdin=stdin is not None, environment=dict(env), workdir=cwd
            )["Id"]
            sock = self._api.exec_start(exec_id, socket=True)
        except APIError as exc:
            self._guard(exc)
            raise SandboxError(f"exec in sandbox {self.id} failed: {exc.explanation or exc}") from None
        raw: socket.socket = getattr(sock, "_sock", sock)
        raw.settimeout(None)  # blocking: stdin's sendall (another thread) must not time out
        pending = getattr(raw, "pending", lambda: 0)  # TLS: data already decrypted

        def read() -> bytes | None:
            if not pending() and not select.select([raw], [], [], 0.1)[0]:
                return None
            return raw.recv(65536)

        # one multiplexed socket: read on this thread, no hand-off per command
        pump.read_stream(
            read,
            StreamFrames(
                lambda stream, data: pump.feed("stderr" if stream == STDERR else "stdout", data)
            ).feed,
            close=raw.close,
            inline=True,
        )
        if stdin is not None:
            pump.send(stdin, raw.sendall, lambda: raw.shutdown(socket.SHUT_WR))
        ended: dict[str, Any] = {}

        def exited(seconds: float) -> bool:
            try:
                info = self._api.exec_inspect(exec_id)
            except Exception as exc:  # the container went away under the command
                ended["error"] = exc
                return True
            if not info["Running"] and info["ExitCode"] is not None:
                ended["code"] = int(info["ExitCode"])
                return True
            time.sleep(min(seconds, 0.02))
            return False

        pump.wait(exited, drain=5.0)
        if "code" not in ended:
            raise self.not_running()
        return ended["code"]

    def put_tar(self, data: bytes) -> None:
        from docker.errors import APIError

        try:
            self._api.put_archive(self._cid, "/", data)
        except APIError as exc:
            self._guard(exc)
            raise SandboxError(f"could not write into sandbox {self.id}: {exc.explanation or exc}") from None

    def get_tar(self, path: str) -> bytes:
        from docker.errors import APIError, NotFound

        try:
            stream, _stat = self._api.get_archive(self._cid, path)
            return b"".join(stream)
        except NotFound as exc:
            if "no such container" in str(exc).lower():
                raise self.not_running() from None
            raise FileNotFoundError(f"{path} (in sandbox {self.id})") from None
        except APIError as exc:
            self._guard(exc)
            raise SandboxError(f"could not read from sandbox {self.id}: {exc.explanation or exc}") from None

    def existing_dirs(self, paths: list[str]) -> set[str]:
        # The engine's archive stat (HEAD .../archive): no process in the container, a few ms
        # each instead of an exec. (Paths on the tmpfs are not seen this way; teardown asks only
        # for folders of the working directory.)
        from docker.errors import APIError

        found, missing = set(), False
        url = self._api._url("/containers/{0}/archive", self._cid)
        for path in paths:
            response = self._api.head(url, params={"path": path})
            if response.status_code == 404:  # no such path, or no such container: told apart below
                missing = True
                continue
            try:
                self._api._raise_for_status(response)
            except APIError as exc:
                self._guard(exc)
                raise SandboxError(
                    f"could not look into sandbox {self.id}: {exc.explanation or exc}"
                ) from None
            stat = json.loads(base64.b64decode(response.headers["X-Docker-Container-Path-Stat"]))
            if stat["mode"] & (1 << 31):  # Go's os.ModeDir
                found.add(path)
            elif stat["mode"] & (1 << 27):  # os.ModeSymlink: where it leads, the shell's test says
                found |= super().existing_dirs([path])
        if missing and self.status() is not MachineStatus.RUNNING:
            raise self.not_running()  # a folder may have been there: never report it absent
        return found

    def model_cache_dir(self) -> str:
        return HF_MOUNT

    def tools_dir(self) -> str:
        # The image's debug layer installed code-server here (seer_docker.image.code_server_layer).
        return TOOLS_DIR

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
            raise self.not_running() from None
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

        container = None
        if self._cid not in _removed:  # a container removed is gone for good
            with contextlib.suppress(NotFound):
                container = self._client.api.inspect_container(self._cid)
        if container is not None and container["State"]["Status"] in _ALIVE_STATES:
            return MachineStatus.RUNNING
        expires_at = float(self._labels.get("seer.expires_at", "0")) or None
        return LEDGER.settle(self.id, expires_at)


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
        code_server=True,
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
        if config.gpu is not None and not gpu_problem and _is_local_engine() and not detect_gpus():
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
            return self._run(
                client, sandbox_id, tag, spec, options, again=lambda: self._image(client, spec, options, log)
            )
        except BaseException:
            _made.pop((_engine(), sandbox_id), None)
            self._remove(client, sandbox_id)
            LEDGER.forget(sandbox_id)
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
            code_server=spec.code_server,
            code_server_from=options.code_server_from,
            python_packages=spec.python_packages,
            workdir=options.workdir,
            log=log,
            sources=PackageSources(
                find_links=tuple(options.find_links),
                torch_index=options.torch_index,
                cpu_torch=spec.gpu is None,
            ),
        )
        return tag

    def _model_mount(self, options: DockerOptions, spec: MachineSpec) -> dict[str, Any]:
        """The host-config arguments of the shared model cache's mount, or none when the sandbox
        must have a cache of its own (``spec.private_model_cache``: it has hidden models): what
        is not mounted, the agent cannot list, hash or link against.

        The volume is a mount with seer's label: the engine makes it, labelled, if it is missing
        (no lookup per start), and mounts it as it is when it exists."""
        from docker.types import Mount

        if spec.private_model_cache:
            return {}
        if options.model_cache != "volume":
            Path(options.model_cache).mkdir(parents=True, exist_ok=True)
            return {"binds": {options.model_cache: {"bind": HF_MOUNT, "mode": "rw"}}}
        mount = Mount(HF_MOUNT, options.model_volume, type="volume", labels={LABEL: "model-cache"})
        return {"mounts": [mount]}

    def _run(
        self,
        client: DockerClient,
        sandbox_id: str,
        tag: str,
        spec: MachineSpec,
        options: DockerOptions,
        again: Callable[[], str],
    ) -> DockerMachine:
        from docker.errors import ImageNotFound
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
        LEDGER.begin(
            sandbox_id, name=spec.name, timeout=spec.timeout, labels=spec.labels, workdir=options.workdir
        )
        host: dict[str, Any] = {}
        if spec.gpu is not None:
            host["device_requests"] = [DeviceRequest(count=spec.gpu_count, capabilities=[["gpu"]])]
        if options.shm_size:
            host["shm_size"] = options.shm_size
        api = client.api
        host_config = api.create_host_config(
            auto_remove=True,
            init=True,  # Docker's init as PID 1 reaps orphans; when sleep ends, so does the container.
            network_mode=options.network,
            tmpfs={RUN_DIR: "mode=0700"},
            **self._model_mount(options, spec),
            **host,
        )

        def create(image: str) -> str:
            made = api.create_container(
                image,
                entrypoint=["sleep", str(int(spec.timeout))],
                command=[],
                name=sandbox_id,
                hostname=sandbox_id,
                labels=labels,
                environment=env,
                detach=True,
                working_dir=options.workdir,
                host_config=host_config,
            )
            return str(made["Id"])

        try:
            container_id = create(tag)
        except ImageNotFound:
            # The image this process found at an earlier start was removed since: find or build
            # it again (the engine is asked this time), then make the container from it.
            forget_image(client, tag)
            labels["seer.image"] = tag = again()
            container_id = create(tag)
        _made[(_engine(), sandbox_id)] = container_id
        api.start(container_id)
        machine = DockerMachine(client, container_id, labels, dict(spec.secrets))
        # Secrets to the tmpfs (for handles attached later); commands get them through exec. An
        # exec, since the engine's archive upload writes below a tmpfs mount, not into it. No
        # secrets, no file (and no exec): a later handle reads none, and process records make
        # their own folder (umask 077).
        if spec.secrets:
            secrets_file = f"umask 077 && mkdir -p {machine.procs_dir} && cat > {SECRETS_FILE}"
            code, pump = machine.run_pumped(
                ["bash", "-c", secrets_file], stdin=json.dumps(spec.secrets).encode()
            )
            if code != 0:
                raise SandboxError(
                    f"could not write the secrets into sandbox {sandbox_id}: {pump.text('stderr')}"
                )
        if spec.snapshot is not None:
            # what core keeps under <workdir>/.seer (logs, service state) belongs to the old sandbox
            machine.run_pumped(["rm", "-rf", posixpath.join(options.workdir, ".seer")])
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
        record = LEDGER.read(machine_id)
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
        live = []
        for container in self._containers(docker_client(), SANDBOX_LABEL):
            labels = container["Labels"]
            sandbox_id = labels[SANDBOX_LABEL]
            if not LEDGER.valid(sandbox_id):
                continue  # a container labelled by someone else: not a sandbox of ours
            expires_at = float(labels.get("seer.expires_at", "0")) or None
            if container["State"] in _ALIVE_STATES:
                status = MachineStatus.RUNNING
            else:
                status = LEDGER.ended_status(LEDGER.read(sandbox_id), expires_at)
            live.append(
                MachineInfo(
                    sandbox_id,
                    self.name,
                    labels.get("seer.name", sandbox_id),
                    status,
                    float(labels.get("seer.created_at", "0")),
                    expires_at,
                    {k: v for k, v in labels.items() if k.startswith("seer.")},
                )
            )
        # the ledger shows a running one "starting" while its starter lives, and adds ended ones
        return LEDGER.machines(live)

    def terminate(self, machine_id: str) -> None:
        check_sandbox_id(machine_id, DockerProvider)
        client = docker_client()
        LEDGER.end(machine_id, MachineStatus.TERMINATED)
        container_id = _made.pop((_engine(), machine_id), None)
        if container_id is None:  # not made by this process: found by seer's label, or not at all
            container = self._find(client, machine_id)
            container_id = container["Id"] if container is not None else None
        if container_id is not None:
            self._remove(client, container_id)
            _removed.add(container_id)

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


#: The ledger of this client's docker sandboxes: ``$SEER_HOME/docker/sandboxes/<id>.json``.
LEDGER = Ledger(DockerProvider)
DockerMachine.ledger = LEDGER

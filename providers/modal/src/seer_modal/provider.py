"""The ``modal`` provider: a sandbox is a Modal Sandbox, driven through the modal SDK.

``create`` resolves the app, the sandbox image (:mod:`seer_modal.image`: Modal builds each layer
once and caches it by content), the model-cache Volume and one ``modal.Secret.from_dict`` holding
the config's ``env`` and ``secrets`` (what reaches the sandbox's processes, never an image), then
``modal.Sandbox.create`` with:

* ``timeout``: the config's, enforced by Modal itself (at most :data:`MAX_TIMEOUT`): a sandbox
  whose client is gone, even killed, ends then;
* ``tags``: seer's labels plus what a client needs to find and use it again (name, creation and
  deadline, workdir, tunnel ports), so ``seer ls`` / ``seer down`` work from any machine with the
  same Modal credentials;
* ``gpu``: seer's name mapped to Modal's (:mod:`seer_modal.gpus`), ``"H100:2"`` for a count;
* ``encrypted_ports``: a few tunnel ports through which any port of the sandbox reaches the client
  (:mod:`seer_modal.tunnels`); ``jupyter_url`` and served interfaces are HTTPS tunnel URLs;
* the shared model Volume at :data:`~seer_modal.image.HF_MOUNT` (the hub cache), except for a
  sandbox with hidden models, which gets none (a shared cache names its models).

The machine is built on the provider kit (:mod:`seer.providers.kit`): what is Modal's own is
running a command (``Sandbox.exec``, its output iterators into the kit's pump, stdin through its
writer) and the tunnels; the kit does the rest (deadlines that kill a command's whole tree,
background processes, files as tar streams over exec). The kit's ledger in
``$SEER_HOME/modal/sandboxes/`` tells ``terminated`` from ``expired`` or ``lost`` once a sandbox is
gone, and its starter watch ends a half-made sandbox whose starting client died.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import secrets
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from seer.config import SandboxConfig
from seer.errors import ConfigProblem, SandboxError, SandboxNotFoundError
from seer.ids import check_sandbox_id
from seer.providers.base import (
    Availability,
    Capabilities,
    MachineInfo,
    MachineSpec,
    MachineStatus,
    Provider,
    Snapshot,
)
from seer.providers.kit import ExecMachine, Ledger, OutputPump
from seer.providers.wheel import runtime_wheel

from seer_modal.credentials import credentials_problem
from seer_modal.gpus import MAX_GPU_COUNT, MODAL_GPUS, modal_gpu
from seer_modal.image import HF_MOUNT, PYTHON, TOOLS_DIR, ImageCache, sandbox_image
from seer_modal.options import ModalOptions, default_app
from seer_modal.tunnels import PICK, RELAY, STATE_DIR, pick_tunnel_ports, tunnel_url

if TYPE_CHECKING:
    import modal

__all__ = ["MAX_TIMEOUT", "ModalMachine", "ModalProvider"]

#: Modal's longest sandbox timeout: 24 hours.
MAX_TIMEOUT = 24 * 3600
#: The tag every seer sandbox carries (``seer ls`` lists by it).
MANAGED_TAG = "seer.managed"
_PREFIX = "modal-"

_apps_lock = threading.Lock()
_apps: dict[str, Any] = {}
#: The SDK's handles of the sandboxes this process made or found, by seer id: reused rather than
#: looked up again (``from_id`` is a round trip, and a handle caches its command router).
_handles: dict[str, Any] = {}


#: The Modal server and workspace the caches above and ``_resolved`` below were filled from.
_caches_for: tuple[str, str, str] | None = None


def _server() -> tuple[str, str, str]:
    """Which Modal server and workspace this process talks to now (what ImageCache keys by too)."""
    return tuple(os.environ.get(k, "") for k in ("MODAL_SERVER_URL", "MODAL_TOKEN_ID", "MODAL_PROFILE"))  # type: ignore[return-value]


def _same_server() -> None:
    """Drop the apps, handles and resolved objects this process holds when it now talks to another
    Modal server or workspace: they are hydrated against the old one (a call through one would go
    to the old address, or name an object the new one does not have)."""
    global _caches_for
    now = _server()
    if _caches_for == now:
        return
    with _apps_lock:
        _apps.clear()
    _forget_resolved()
    _caches_for = now


def _app(name: str, *, create: bool = True) -> modal.App | None:
    """The Modal app ``name``, looked up once per process (None: it does not exist)."""
    import modal

    _same_server()

    with _apps_lock:
        if name not in _apps:
            try:
                _apps[name] = modal.App.lookup(name, create_if_missing=create)
            except modal.exception.NotFoundError:
                return None
        return _apps[name]


#: Hydrated Images (by id) and Volumes (by app and name) this process already resolved: a start
#: that finds one makes no ImageFromId / VolumeGetOrCreate call. One Modal no longer has fails
#: the create with NotFoundError, which drops these and tries once more from the names.
_resolved_lock = threading.Lock()
_resolved: dict[tuple[str, str], Any] = {}


def _resolved_image(image_id: str) -> Any:
    import modal

    _same_server()
    with _resolved_lock:
        return _resolved.get(("image", image_id)) or modal.Image.from_id(image_id)


def _resolved_volume(name: str) -> Any:
    import modal

    _same_server()
    with _resolved_lock:
        return _resolved.get(("volume", name)) or modal.Volume.from_name(name, create_if_missing=True)


def _keep_resolved(kind: str, key: str, obj: Any) -> None:
    try:
        obj.object_id  # noqa: B018 - an unhydrated object has none (AttributeError)
    except AttributeError:
        return
    with _resolved_lock:
        _resolved[(kind, key)] = obj


def _forget_resolved() -> None:
    with _resolved_lock:
        _resolved.clear()


def _modal_id(sandbox_id: str) -> str:
    return check_sandbox_id(sandbox_id, ModalProvider)[len(_PREFIX) :]


def _handle(sandbox_id: str) -> modal.Sandbox:
    """The SDK's handle of a sandbox: the one this process has, else ``Sandbox.from_id`` (which
    raises ``modal.exception.NotFoundError`` for an id Modal does not know)."""
    import modal

    found = _handles.get(sandbox_id)
    if found is None:
        found = _handles[sandbox_id] = modal.Sandbox.from_id(_modal_id(sandbox_id))
    return found


def _sdk_error(what: str, exc: BaseException) -> SandboxError:
    """One clear error for a failed SDK call; a credentials problem says how to fix it."""
    import modal

    if isinstance(exc, modal.exception.AuthError):
        return SandboxError(f"{what}: Modal refused the credentials ({exc}); {credentials_problem() or ''}")
    return SandboxError(f"{what}: {type(exc).__name__}: {exc}")


class ModalMachine(ExecMachine):
    """A handle on one Modal sandbox."""

    def __init__(self, sandbox_id: str, tags: Mapping[str, str], sandbox: modal.Sandbox | None = None):
        self.id = sandbox_id
        self.workdir = tags.get("seer.workdir", "/workspace")
        self.python = PYTHON
        self.packages_installed = True
        self.expires_at = float(tags.get("seer.expires_at", "0")) or None
        self.tunnel_ports = [int(p) for p in tags.get("seer.tunnels", "").split(",") if p]
        self._sandbox = sandbox
        self._tunnels: dict[int, Any] | None = None
        self._exposed: dict[int, str] = {}
        self._lock = threading.Lock()

    def sandbox(self) -> modal.Sandbox:
        """The SDK's handle (found by id on first use, then kept: it caches the command router)."""
        import modal

        with self._lock:
            if self._sandbox is None:
                try:
                    self._sandbox = _handle(self.id)
                except modal.exception.NotFoundError:
                    raise self.not_running() from None
            return self._sandbox

    def command_env(self) -> dict[str, str]:
        return {"SEER_SANDBOX_ID": self.id}

    # --- what the kit runs on ---------------------------------------------------------------
    def run(
        self, argv: list[str], *, env: Mapping[str, str], cwd: str, stdin: bytes | None, pump: OutputPump
    ) -> int:
        import modal

        if stdin is None:  # Modal keeps an exec's stdin open until told: give it none at once
            argv = ["bash", "-c", 'exec "$@" </dev/null', "seer", *argv]
        try:
            proc = self.sandbox().exec(*argv, workdir=cwd, env=dict(env), text=False)
        except modal.exception.Error as exc:
            raise self._gone_or(exc, "exec") from None
        ended: dict[str, Any] = {}
        done = threading.Event()

        def wait() -> None:
            try:
                ended["code"] = proc.wait()
            except BaseException as exc:
                ended["error"] = exc
            done.set()

        threading.Thread(target=wait, name="seer-modal-exec-wait", daemon=True).start()
        pump.read_stream(_chunks(proc.stdout), "stdout")
        pump.read_stream(_chunks(proc.stderr), "stderr")
        if stdin is not None:
            pump.send(stdin, _stdin_writer(proc.stdin), lambda: _close_stdin(proc.stdin))
        try:
            pump.wait(done.wait, drain=5.0)
        except modal.exception.Error as exc:
            raise self._gone_or(exc, "exec") from None
        if "code" not in ended:
            raise self._gone_or(ended.get("error"), "exec")
        code = ended["code"]
        return 137 if code is None or code < 0 else int(code)

    def existing_dirs(self, paths: list[str]) -> set[str]:
        # Two calls instead of an exec's four: stderr is not read (DEVNULL), and the listing's
        # last line says it ran to the end, so its exit status need not be waited for.
        import modal
        from modal.stream_type import StreamType

        script = 'for d in "$@"; do if [ -d "$d" ]; then echo "$d"; fi; done; echo "$0"'
        end = f"seer-listed-{secrets.token_hex(4)}"
        try:
            proc = self.sandbox().exec(
                "bash", "-c", script, end, *paths, stderr=StreamType.DEVNULL, text=True
            )
            lines = proc.stdout.read().splitlines()
        except modal.exception.Error as exc:
            raise self._gone_or(exc, "listing") from None
        if not lines or lines[-1] != end:
            raise self._gone_or(None, "listing")
        return set(lines[:-1]) & set(paths)

    def _gone_or(self, exc: BaseException | None, what: str) -> SandboxError:
        """``SandboxNotRunningError`` if the sandbox is gone, else a ``SandboxError`` for ``exc``."""
        if self.status() is not MachineStatus.RUNNING:
            return self.not_running()
        return _sdk_error(f"{what} in sandbox {self.id} failed", exc or RuntimeError("no exit status"))

    # --- network and state ----------------------------------------------------------------
    def expose_port(self, port: int) -> str:
        port = int(port)
        if port in self._exposed:
            return self._exposed[port]
        if not self.tunnel_ports:
            raise SandboxError(f"sandbox {self.id} was created without tunnels")
        code, pump = self.run_pumped(
            [self.python, "-c", PICK, STATE_DIR, str(port), RELAY, *map(str, self.tunnel_ports)], timeout=60
        )
        if code != 0:
            raise SandboxError(f"could not expose port {port} of sandbox {self.id}: {pump.text('stderr')}")
        tunnel_port = int(pump.text("stdout").split()[-1])
        if self._tunnels is None:
            import modal

            try:
                self._tunnels = self.sandbox().tunnels()
            except modal.exception.Error as exc:
                raise self._gone_or(exc, "tunnels") from None
        tunnel = self._tunnels[tunnel_port]
        url = tunnel_url(tunnel.host, tunnel.port)
        self._exposed[port] = url
        return url

    def model_cache_dir(self) -> str:
        return HF_MOUNT

    def tools_dir(self) -> str:
        # the image's code-server layer installed it here (seer_modal.image.code_server_layers)
        return TOOLS_DIR

    def snapshot(self, description: str = "") -> Snapshot:
        import modal

        try:
            image = self.sandbox().snapshot_filesystem()
        except modal.exception.Error as exc:
            raise self._gone_or(exc, "snapshot") from None
        return Snapshot(
            "modal",
            f"snap-{secrets.token_hex(6)}",
            description,
            time.time(),
            self.id,
            {"image_id": image.object_id, "workdir": self.workdir},
        )

    def status(self) -> MachineStatus:
        import modal

        record = LEDGER.read(self.id)
        if record and record.get("status") == MachineStatus.TERMINATED.value:
            return MachineStatus.TERMINATED  # this client ended it: no need to ask Modal
        try:
            alive = self.sandbox().poll() is None
        except (modal.exception.NotFoundError, SandboxError):
            alive = False
        return LEDGER.status(self.id, alive=alive, expires_at=self.expires_at)


#: The most stdin the SDK buffers before a drain (it refuses more); below its 16 MiB limit.
STDIN_CHUNK = 8 * 1024 * 1024


def _stdin_writer(writer: Any) -> Any:
    """Write stdin into the SDK's buffer, draining it (one round trip) before it overflows; what
    is left is sent with the end-of-file, so small input costs one round trip in all."""

    def write(data: bytes) -> None:
        view = memoryview(data)
        while len(view) > STDIN_CHUNK:
            writer.write(view[:STDIN_CHUNK])
            writer.drain()
            view = view[STDIN_CHUNK:]
        writer.write(view)

    return write


def _close_stdin(writer: Any) -> None:
    writer.write_eof()
    writer.drain()


def _chunks(stream: Any) -> Any:
    """A ``read()`` for the kit's pump over an SDK output stream (bytes chunks, b"" at its end)."""
    it = iter(stream)

    def read() -> bytes | None:
        try:
            chunk = next(it)
        except StopIteration:
            return b""
        return (chunk.encode() if isinstance(chunk, str) else chunk) or None

    return read


class ModalProvider(Provider):
    """Sandboxes on Modal: images built and cached by Modal, models in a Modal Volume."""

    name: ClassVar[str] = "modal"
    #: ``modal-`` and Modal's own sandbox id (``sb-`` and base62 characters).
    id_pattern: ClassVar[str] = r"modal-sb-[A-Za-z0-9]{20,32}"
    description: ClassVar[str] = "Modal sandboxes: GPUs on demand, images and models cached by Modal"
    capabilities: ClassVar[Capabilities] = Capabilities(
        gpu_types=frozenset(MODAL_GPUS),
        max_gpu_count=MAX_GPU_COUNT,
        snapshots=True,
        volumes=True,
        port_exposure="tunnel",
        max_lifetime=MAX_TIMEOUT,
        installs_system_packages=True,
        hides_models=True,
        dockerfile_repos=True,
        code_server=True,  # an image layer of its own (seer_modal.image.code_server_layers)
    )
    options_model = ModalOptions

    @classmethod
    def availability(cls) -> Availability:
        import importlib.util

        if importlib.util.find_spec("modal") is None:
            return Availability(False, "the modal SDK is not installed (pip install 'seer[modal]')")
        problem = credentials_problem()
        return Availability(False, problem) if problem else Availability(True)

    @classmethod
    def check_config(cls, config: SandboxConfig) -> list[ConfigProblem]:
        problems = super().check_config(config)
        if config.gpu in MODAL_GPUS and not any(p.field.startswith("gpu") for p in problems):
            name, most = MODAL_GPUS[config.gpu]
            if config.gpu_count > most:
                problems.append(
                    ConfigProblem("gpu_count", f"Modal gives at most {most} {name} GPUs to one sandbox")
                )
        with_dockerfile = [i for i, r in enumerate(config.repos) if r.dockerfile]
        for i in with_dockerfile[1:]:
            problems.append(
                ConfigProblem(
                    f"repos[{i}].dockerfile",
                    f"only one repo may give the image's Dockerfile; "
                    f"repos[{with_dockerfile[0]}] already does",
                )
            )
        return problems

    # --- lifecycle ------------------------------------------------------------------------
    def create(self, spec: MachineSpec) -> ModalMachine:
        import modal

        options: ModalOptions = spec.options or ModalOptions()
        made: modal.Sandbox | None = None
        sandbox_id = None
        try:
            app = _app(options.app_name)
            wheel = runtime_wheel()
            key = IMAGES.key(spec, options, wheel)
            known = IMAGES.get(key)
            image = _resolved_image(known) if known else sandbox_image(spec, options, wheel)
            volumes: dict[str | os.PathLike[Any], modal.Volume | modal.CloudBucketMount] = {}
            if not spec.private_model_cache:
                volumes[HF_MOUNT] = _resolved_volume(options.model_volume)
            env: dict[str, str | None] = {**spec.env, "SEER_WORKDIR": options.workdir, **spec.secrets}
            ports = pick_tunnel_ports(options.tunnel_ports)
            now = time.time()
            tags: dict[str, Any] = {  # also kept in the ledger's record (attach reads them there)
                **spec.labels,
                MANAGED_TAG: "sandbox",
                "seer.created_at": f"{now:.3f}",
                "seer.expires_at": f"{now + spec.timeout:.3f}",
                "seer.workdir": options.workdir,
                "seer.tunnels": ",".join(map(str, ports)),
            }
            spec.report(f"creating a Modal sandbox in app {options.app_name!r}")

            def make(image: Any) -> modal.Sandbox:
                return modal.Sandbox.create(
                    app=app,
                    image=image,
                    secrets=[modal.Secret.from_dict(env)],
                    volumes=volumes,
                    timeout=spec.timeout,
                    workdir=options.workdir,
                    gpu=modal_gpu(spec.gpu, spec.gpu_count),
                    cpu=options.cpu,
                    memory=options.memory,
                    region=options.region,
                    cloud=options.cloud,
                    tags=tags,
                    encrypted_ports=ports,
                )

            try:
                made = make(image)
            except modal.exception.NotFoundError:
                _forget_resolved()  # a volume or image this process resolved may be gone
                if HF_MOUNT in volumes:
                    volumes[HF_MOUNT] = _resolved_volume(options.model_volume)
                if known:
                    IMAGES.put(key, None)  # Modal no longer has it: build (or find) it again
                    image = sandbox_image(spec, options, wheel)
                made = make(image)
            if not known:
                IMAGES.put(key, image.object_id)
            _keep_resolved("image", image.object_id, image)
            if HF_MOUNT in volumes:
                _keep_resolved("volume", options.model_volume, volumes[HF_MOUNT])
            sandbox_id = f"{_PREFIX}{made.object_id}"
            _handles[sandbox_id] = made
            LEDGER.begin(sandbox_id, name=spec.name, timeout=spec.timeout, labels=spec.labels, **tags)
            machine = ModalMachine(sandbox_id, tags, made)
            if spec.snapshot is not None:
                # what core keeps under <workdir>/.seer (logs, process records) is the old sandbox's
                machine.run_pumped(["rm", "-rf", posixpath.join(options.workdir, ".seer"), STATE_DIR])
            return machine
        except BaseException as exc:
            if made is not None:
                with contextlib.suppress(Exception):
                    made.terminate()
            if sandbox_id is not None:
                LEDGER.forget(sandbox_id)
            if isinstance(exc, modal.exception.Error):
                raise _sdk_error("could not create the Modal sandbox", exc) from None
            raise

    def attach(self, machine_id: str) -> ModalMachine:
        import modal

        _modal_id(machine_id)
        record = LEDGER.read(machine_id)
        try:
            sandbox = _handle(machine_id)
            tags = record if record and "seer.workdir" in record else sandbox.get_tags()
        except modal.exception.NotFoundError:
            if record is None:
                raise SandboxNotFoundError(f"no modal sandbox {machine_id!r}") from None
            return ModalMachine(machine_id, record)  # gone: its status says how it ended
        except modal.exception.Error as exc:
            raise _sdk_error(f"could not find modal sandbox {machine_id}", exc) from None
        if tags.get(MANAGED_TAG) != "sandbox" and record is None:
            raise SandboxNotFoundError(f"modal sandbox {machine_id} is not one of seer's")
        return ModalMachine(machine_id, tags, sandbox)

    def list(self) -> list[MachineInfo]:
        import modal

        live = []
        app = _app(default_app(), create=False)
        if app is not None:
            for sandbox in modal.Sandbox.list(app_id=app.app_id, tags={MANAGED_TAG: "sandbox"}):
                sandbox_id = f"{_PREFIX}{sandbox.object_id}"
                if not LEDGER.valid(sandbox_id):
                    continue
                try:
                    tags = sandbox.get_tags()
                except modal.exception.NotFoundError:
                    continue
                live.append(
                    MachineInfo(
                        sandbox_id,
                        self.name,
                        tags.get("seer.name", sandbox_id),
                        MachineStatus.RUNNING,
                        float(tags.get("seer.created_at", "0")),
                        float(tags.get("seer.expires_at", "0")) or None,
                        {k: v for k, v in tags.items() if k.startswith("seer.")},
                    )
                )
        # Sandboxes of other apps this client made, and ended ones, come from the ledger.
        return LEDGER.machines(live, alive=lambda sandbox_id: self.attach(sandbox_id).status().alive)

    def terminate(self, machine_id: str) -> None:
        import modal

        _modal_id(machine_id)
        LEDGER.end(machine_id, MachineStatus.TERMINATED)
        try:
            _handle(machine_id).terminate()
        except modal.exception.NotFoundError:
            pass  # unknown or long gone: terminate is idempotent

    def delete_snapshot(self, snapshot: Snapshot) -> None:
        """Nothing to do: Modal keeps a filesystem snapshot's image until it expires (30 days);
        the SDK has no call that deletes one."""


#: The ids of the images this client had Modal build (``$SEER_HOME/modal/images.json``).
IMAGES = ImageCache()
#: The ledger of this client's modal sandboxes: ``$SEER_HOME/modal/sandboxes/<id>.json``.
LEDGER = Ledger(ModalProvider)
ModalMachine.ledger = LEDGER

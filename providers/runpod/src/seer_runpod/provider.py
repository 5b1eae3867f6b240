"""The ``runpod`` provider: a sandbox is a RunPod pod, reached over SSH with seer-ssh's machine.

``create`` rents a pod through the runpod SDK (``create_pod`` with the image, the GPU type RunPod
calls the config's GPU, the count, ``22/tcp``, the env and the volume; a CPU pod for ``gpu=None``),
waits for its SSH port, and bootstraps it exactly as seer-ssh bootstraps a host of your own
(:func:`seer_ssh.machine.provision`): one SSH implementation.

**Lifetime.** RunPod pods have none: one nobody ends bills until the account runs dry. The pod's
watchdog (the kit's, started by ``provision``) ends the sandbox at its timeout and then terminates
its own pod through the API (:mod:`seer_runpod.watchdog`, with the pod's own key and the API URL
the client used), with no client anywhere. ``list`` reads seer's pods from the API (by name,
``seer-<sandbox id>``) with their age and cost so far; ``terminate`` is ``terminate_pod``.

**Keys.** Each pod gets an SSH key pair of its own, made here (``$SEER_HOME/runpod/keys/``, 0600)
and authorised through the pod's ``PUBLIC_KEY``. RunPod does not publish a pod's host key, so the
first connection records it (``$SEER_HOME/runpod/known_hosts/<id>``) and every later one, the
port forwarders' included, must see the same key.

**Secrets** go in as the pod's environment through the API (and to seer's 0600 environment file
over SFTP), never into an image or a log. The API key comes from ``RUNPOD_API_KEY`` or runpod's own
config; without one, nothing is attempted.
"""

from __future__ import annotations

import contextlib
import posixpath
import re
import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ValidationError
from seer.config import GPU_CATALOGUE, SandboxConfig
from seer.errors import ConfigProblem, SandboxError, SandboxNotFoundError, SandboxNotRunningError
from seer.ids import check_sandbox_id
from seer.providers.base import Availability, Capabilities, MachineInfo, MachineSpec, MachineStatus, Provider
from seer.providers.kit import Ledger
from seer.state import private_dir, seer_home
from seer_ssh.connection import Connection, HostKeyError, SshConnectError, connect, connected
from seer_ssh.forward import stop_forwards
from seer_ssh.machine import SshMachine, agent, provision
from seer_ssh.options import SshOptions

from seer_runpod import api
from seer_runpod.code_server import upload_prepared
from seer_runpod.options import RunPodOptions

__all__ = ["RunPodMachine", "RunPodProvider"]

#: What the pod runs after its sandbox ended at its timeout (see :mod:`seer_runpod.watchdog`).
TERMINATE_SOURCE = resources.files("seer_runpod").joinpath("watchdog.py").read_text()
#: Pods seer makes are named ``seer-<sandbox id>``.
_POD_NAME = re.compile(r"^seer-(runpod-[0-9a-f]{12})$")
#: Characters the runpod SDK cannot send in a value (it writes them into GraphQL unescaped).
_UNSENDABLE = ('"', "\\", "\n", "\r")
#: The caches a pod's sandboxes share, under :meth:`RunPodOptions.shared_dir` (see ``_shared_links``).
_SHARED = ("hf-hub", "envs", "runtime")
#: What RunPod calls a stopped pod (``podStop``): its container ended, the pod not terminated.
_STOPPED = "EXITED"
#: The sandboxes whose pods this process terminated through the API (``terminate_pod``
#: answered for each): their status is known without asking again.
_TERMINATED: set[str] = set()


def _unsendable(value: str) -> bool:
    return any(c in value for c in _UNSENDABLE) or not value.isprintable()


def _folder(what: str) -> Path:
    return private_dir(seer_home() / "runpod" / what)


def _key_pair(sandbox_id: str) -> str:
    """A fresh ed25519 key pair for one pod: the private key into its file (0600, where
    :func:`_ssh_options` points); the public line returned."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    path = _folder("keys") / sandbox_id
    path.touch(mode=0o600)
    path.write_bytes(private)
    return public.decode() + f" seer-{sandbox_id}"


def _forget_keys(sandbox_id: str) -> None:
    (_folder("keys") / sandbox_id).unlink(missing_ok=True)
    (_folder("known_hosts") / sandbox_id).unlink(missing_ok=True)


def _ssh_options(sandbox_id: str, host: str, port: int, options: RunPodOptions) -> SshOptions:
    return SshOptions(
        host=host,
        port=port,
        user="root",
        key_file=str(_folder("keys") / sandbox_id),
        use_agent=False,
        known_hosts=str(_folder("known_hosts") / sandbox_id),
        # RunPod does not publish a pod's host key: the first connection records it, and from then
        # on the pod must show that key (a changed one is refused)
        host_key_policy="accept-new",
        base_dir=options.base_dir(),
        python=options.python,
        connect_timeout=20,
    )


def _ssh_address(pod: dict[str, Any] | None) -> tuple[str, int] | None:
    """Where the pod's sshd answers (its ``22/tcp`` port as published), once it is up."""
    runtime = (pod or {}).get("runtime") or {}
    for port in runtime.get("ports") or []:
        if port.get("privatePort") == 22 and port.get("isIpPublic") and port.get("type") == "tcp":
            return str(port["ip"]), int(port["publicPort"])
    return None


def _pod_env(pod: dict[str, Any]) -> dict[str, str]:
    out = {}
    for item in pod.get("env") or []:
        key, _, value = str(item).partition("=")
        out[key] = value
    return out


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _gpu_label(pod: dict[str, Any]) -> str:
    """``2 x A100 PCIe`` (RunPod's display name) or ``cpu``."""
    name = (pod.get("machine") or {}).get("gpuDisplayName")
    count = int(pod.get("gpuCount") or 0)
    return f"{count} x {name}" if name and count else "cpu"


class RunPodMachine(SshMachine):
    """A sandbox in a RunPod pod: seer-ssh's machine, its status from the API."""

    provider_name = "runpod"

    def _pod_state(self) -> str | None:
        """The pod's ``desiredStatus`` as the API says it (``RUNNING``, ``EXITED``: stopped), or
        ``GONE`` (terminated), or None: the API cannot be asked."""
        pod_id = self.record.get("pod_id")
        try:
            pod = api.sdk().get_pod(pod_id) if pod_id else None
        except Exception:
            return None
        return str(pod.get("desiredStatus")) if pod is not None else "GONE"

    def gone(self) -> bool:
        return self._pod_state() not in (None, "RUNNING")

    def tools_dir(self) -> str:
        # beside the caches the pod's sandboxes share (RunPodOptions.tools_dir): on the volume
        return str(self.record.get("tools") or posixpath.join(self.base, "tools"))

    def status(self) -> MachineStatus:
        if self.id in _TERMINATED:  # this process terminated its pods: no pod comes back
            return MachineStatus.TERMINATED
        state = self._pod_state()
        if state == _STOPPED:
            return MachineStatus.STOPPED
        if state not in (None, "RUNNING"):
            return LEDGER.settle(self.id, self.expires_at)
        return super().status()

    def not_running(self) -> SandboxNotRunningError:
        if self._pod_state() == _STOPPED:
            return SandboxNotRunningError(
                f"sandbox {self.id}: its pod {self.record.get('pod_id')} is stopped (RunPod's EXITED), so "
                "nothing in it can be reached or copied; resume it in RunPod's console to copy what "
                f"you need, or `seer down --force {self.id}` to terminate it"
            )
        return super().not_running()


class _KeylessConnection(Connection):
    """The connection of a sandbox this seer home did not start: it has no SSH key for the pod,
    so every use fails, saying so (the sandbox can still be listed and terminated by the API)."""

    def __init__(self, options: SshOptions, sandbox_id: str):
        super().__init__(options)
        self.sandbox_id = sandbox_id

    def _connect(self) -> None:
        raise SshConnectError(
            f"this seer home has no SSH key for sandbox {self.sandbox_id}'s pod (it was started from "
            "another seer home, which alone can reach it); terminating it from here with "
            f"`seer down --force {self.sandbox_id}` deletes what is in it without a copy"
        )


class RunPodProvider(Provider):
    """Sandboxes as RunPod pods."""

    name: ClassVar[str] = "runpod"
    id_pattern: ClassVar[str] = r"runpod-[0-9a-f]{12}"
    description: ClassVar[str] = (
        "RunPod pods over SSH: GPUs by the hour, ended at their timeout by the pod itself"
    )
    capabilities: ClassVar[Capabilities] = Capabilities(
        gpu_types=frozenset(GPU_CATALOGUE),
        max_gpu_count=8,
        volumes=True,  # a network volume holds the model cache across pods
        port_exposure="ssh-forward",
        hides_models=True,
        code_server=True,  # in the pod's shared folder, installed or uploaded once (seer_runpod.code_server)
    )
    options_model = RunPodOptions

    @classmethod
    def availability(cls) -> Availability:
        try:
            import paramiko  # noqa: F401
        except ImportError:
            return Availability(False, "paramiko is not installed (pip install 'seer[runpod]')")
        if api.api_key() is None:
            return Availability(
                False,
                "no RunPod API key: set RUNPOD_API_KEY (https://www.runpod.io/console/user/settings), "
                "or run `runpod config`",
            )
        return Availability(True)

    @classmethod
    def check_config(cls, config: SandboxConfig) -> list[ConfigProblem]:
        problems = super().check_config(config)
        if any(p.field in ("provider", "gpu", "gpu_count") for p in problems):
            return problems
        problems += _hidden_problems(config)
        for i, _pkg in enumerate(config.system_packages):
            problems.append(
                ConfigProblem(
                    f"system_packages[{i}]",
                    "the runpod provider installs no system packages: use an image that has them "
                    "(provider_options image)",
                )
            )
        if config.gpu is not None:
            try:
                offers = api.gpu_offers(config.gpu_count)
            except Exception as exc:
                return [*problems, ConfigProblem("provider", f"the RunPod API did not answer: {exc}")]
            offer, why = api.pick_gpu(config.gpu, config.gpu_count, offers)
            if offer is None:
                problems.append(ConfigProblem("gpu", why))
        return problems

    # --- lifecycle ------------------------------------------------------------------------
    def create(self, spec: MachineSpec) -> RunPodMachine:
        options: RunPodOptions = spec.options or RunPodOptions()
        if spec.private_model_cache and options.network_volume_id:
            raise SandboxError(_HIDDEN_ON_VOLUME)
        for name, value in {**spec.env, **spec.secrets}.items():
            if _unsendable(name) or _unsendable(value):
                what = "secret" if name in spec.secrets else "env"
                raise SandboxError(
                    f"{what} {name}: its value holds a quote, backslash or newline, which the runpod "
                    "SDK cannot send as pod environment"
                )
        # the runpod SDK writes these into its GraphQL as they are: checked by the options too
        for option in ("image", "volume_mount_path", "network_volume_id", "cpu_instance_id"):
            value = getattr(options, option)
            if value is not None and _unsendable(value):
                raise SandboxError(f"provider_options.{option}: {value!r} cannot be sent to RunPod's API")
        runpod = api.sdk()
        gpu_id = None
        if spec.gpu is not None:
            offer, why = api.pick_gpu(spec.gpu, spec.gpu_count, api.gpu_offers(spec.gpu_count))
            if offer is None:
                raise SandboxError(why)
            gpu_id = offer.id
        sandbox_id = f"runpod-{secrets.token_hex(6)}"
        LEDGER.begin(sandbox_id, name=spec.name, timeout=spec.timeout, labels=spec.labels, pod_id=None)
        try:
            return self._create(runpod, sandbox_id, spec, options, gpu_id)
        except BaseException:
            with contextlib.suppress(Exception):
                self._terminate_pods(sandbox_id)
            LEDGER.forget(sandbox_id)
            _forget_keys(sandbox_id)
            raise

    def _create(
        self, runpod: Any, sandbox_id: str, spec: MachineSpec, options: RunPodOptions, gpu_id: str | None
    ) -> RunPodMachine:
        public = _key_pair(sandbox_id)
        expires_at = time.time() + spec.timeout
        env = {
            **spec.env,
            **spec.secrets,
            "PUBLIC_KEY": public,
            "SEER_SANDBOX_ID": sandbox_id,
            "SEER_SANDBOX_NAME": spec.name,
            "SEER_EXPIRES_AT": f"{expires_at:.0f}",
            "SEER_RUNPOD_API_URL": api.api_url(),
        }
        spec.report(f"renting a {'CPU pod' if gpu_id is None else f'pod with {spec.gpu_count} x {gpu_id}'}")
        pod = runpod.create_pod(
            f"seer-{sandbox_id}",
            options.image,
            gpu_id,
            cloud_type=options.cloud_type,
            gpu_count=spec.gpu_count,
            volume_in_gb=0 if options.network_volume_id else options.volume_gb,
            container_disk_in_gb=options.container_disk_gb,
            ports="22/tcp",
            volume_mount_path=options.volume_mount_path,
            env=env,
            network_volume_id=options.network_volume_id,
            data_center_id=_volume_data_center(runpod, options.network_volume_id),
            instance_id=options.cpu_instance_id if gpu_id is None else None,
        )
        pod_id = pod["id"]
        LEDGER.update(sandbox_id, pod_id=pod_id)
        spec.report(f"pod {pod_id}: waiting for its SSH port")
        conn, ssh = self._reach(runpod, sandbox_id, pod_id, options)
        machine = provision(  # RunPodMachine, as asked
            conn,
            RunPodMachine,
            sandbox_id,
            spec,
            base=conn.expand(ssh.base_dir),
            ledger=LEDGER,
            # after the sandbox ends at its timeout, the pod terminates itself through the API
            then=[ssh.python, "-c", TERMINATE_SOURCE, api.api_url(), pod_id],
            links=_shared_links(options),  # made by the agent's begin: no call of their own
        )
        assert isinstance(machine, RunPodMachine)
        machine.record.update(pod_id=pod_id, ssh=ssh.model_dump(), tools=options.tools_dir())
        if spec.code_server and options.code_server_from:
            upload_prepared(
                conn, options.tools_dir(), options.code_server_from, spec.report, python=ssh.python
            )
        LEDGER.update(sandbox_id, **{k: v for k, v in machine.record.items() if k != "status"})
        return machine

    def _reach(
        self, runpod: Any, sandbox_id: str, pod_id: str, options: RunPodOptions
    ) -> tuple[Connection, SshOptions]:
        """The pod's SSH connection, once it answers (within ``startup_timeout``)."""
        deadline = time.monotonic() + options.startup_timeout
        last = "the pod has no SSH port yet"
        pause = _POLL_FIRST
        steady_until = time.monotonic() + _POLL_STEADY
        while time.monotonic() < deadline:
            address = _ssh_address(runpod.get_pod(pod_id))
            if address is not None:
                ssh = _ssh_options(sandbox_id, *address, options)
                try:
                    return connect(ssh), ssh
                except HostKeyError:
                    raise
                except SshConnectError as exc:
                    last = str(exc)
            # as often as a hand-written loop at first (a pod that is up is reached at once),
            # then less often (a pod that boots for minutes is not asked several times a second)
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            if time.monotonic() >= steady_until:
                pause = min(pause * 1.5, _POLL_MAX)
        raise SandboxError(f"pod {pod_id} did not answer over SSH in {options.startup_timeout:g} s: {last}")

    def _machine(self, sandbox_id: str, record: dict[str, Any]) -> RunPodMachine:
        ssh = SshOptions.model_validate(record["ssh"])
        return RunPodMachine(connect_lazily(ssh), sandbox_id, record, LEDGER)

    def attach(self, machine_id: str) -> RunPodMachine:
        """The sandbox: from this client's ledger (reached over SSH with the pod's key), else
        found on the account by its pod's name (any seer home with the API key), which can be
        listed and terminated but not reached: the pod's SSH key is the starting home's."""
        check_sandbox_id(machine_id, type(self))
        record = LEDGER.read(machine_id)
        if record is not None and record.get("ssh"):
            return self._machine(machine_id, record)
        pods = self._seer_pods().get(machine_id)
        if not pods:
            raise SandboxNotFoundError(f"no runpod sandbox {machine_id!r} on this RunPod account")
        pod = pods[0]
        env = _pod_env(pod)
        try:
            options = RunPodOptions(
                volume_mount_path=str(pod.get("volumeMountPath") or "/workspace"),
                volume_gb=int(float(pod.get("volumeInGb") or 0)),
                network_volume_id=pod.get("networkVolumeId") or None,
            )
        except (ValidationError, ValueError, TypeError):
            options = RunPodOptions()
        host, port = _ssh_address(pod) or (f"{pod['id']}.pod.invalid", 22)
        ssh = _ssh_options(machine_id, host, port, options)
        found = {
            **(record or {}),
            "base": options.base_dir(),
            "pod_id": pod["id"],
            "name": env.get("SEER_SANDBOX_NAME") or machine_id,
            "expires_at": _float(env.get("SEER_EXPIRES_AT")),
        }
        return RunPodMachine(_KeylessConnection(ssh, machine_id), machine_id, found, LEDGER)

    def _seer_pods(self) -> dict[str, list[dict[str, Any]]]:
        """seer's pods on the account, by sandbox id."""
        out: dict[str, list[dict[str, Any]]] = {}
        for pod in api.sdk().get_pods() or []:
            match = _POD_NAME.match(str(pod.get("name") or ""))
            if match and LEDGER.valid(match.group(1)):
                out.setdefault(match.group(1), []).append(pod)
        return out

    def list(self) -> list[MachineInfo]:
        live = []
        now = time.time()
        for sandbox_id, pods in self._seer_pods().items():
            pod = pods[0]
            env = _pod_env(pod)
            uptime = float(pod.get("uptimeSeconds") or 0)
            record = LEDGER.read(sandbox_id) or {}
            created = float(record.get("created_at") or now - uptime)
            cost_per_hr = float(pod.get("costPerHr") or 0)
            state = pod.get("desiredStatus")
            if state == "RUNNING" and record.get("status") not in (None, MachineStatus.RUNNING.value):
                # its agent ended it (``status()`` found so and recorded it) and the pod's own
                # termination through the API has not landed yet: ended, as ``status()`` says
                status = LEDGER.ended_status(record)
            elif state == "RUNNING":
                status = MachineStatus.RUNNING
            elif state == _STOPPED:  # stopped, not terminated: it still holds (and bills for) a pod
                status = MachineStatus.STOPPED
            else:
                status = LEDGER.ended_status(record, None)
            live.append(
                MachineInfo(
                    sandbox_id,
                    self.name,
                    env.get("SEER_SANDBOX_NAME") or record.get("name") or sandbox_id,
                    status,
                    created,
                    float(env["SEER_EXPIRES_AT"]) if env.get("SEER_EXPIRES_AT") else record.get("expires_at"),
                    {
                        **record.get("labels", {}),
                        "seer.name": env.get("SEER_SANDBOX_NAME") or record.get("name") or sandbox_id,
                        "runpod.pod_id": str(pod.get("id")),
                        "runpod.pod_status": str(state),
                        "runpod.gpu": _gpu_label(pod),
                        "runpod.cost_per_hr": f"{cost_per_hr:.3f}",
                        "runpod.cost_so_far": f"{cost_per_hr * uptime / 3600:.4f}",
                    },
                )
            )
        return LEDGER.machines(live)

    def _terminate_pods(self, sandbox_id: str, pods: Sequence[dict[str, Any]] | None = None) -> None:
        """Terminate the sandbox's pods: ``pods`` (the account's listing, when the caller has
        it) and the ledger's pod, asked for by id only when the listing lacks it."""
        runpod = api.sdk()
        record = LEDGER.read(sandbox_id) or {}
        pod_ids = {p["id"] for p in (self._seer_pods().get(sandbox_id, []) if pods is None else pods)}
        pod_id = record.get("pod_id")
        if pod_id and pod_id not in pod_ids and runpod.get_pod(pod_id) is not None:
            pod_ids.add(pod_id)
        for pod_id in pod_ids:
            runpod.terminate_pod(pod_id)

    def terminate(self, machine_id: str) -> None:
        """End the sandbox, then its pod. Its notebooks and outputs were copied to the client
        first (``Sandbox.terminate``); here, while the pod runs and this home holds its key, the
        sandbox's folder (secrets, hidden models' copies, work) is removed in the pod before the
        pod is terminated. Whatever else happens, nothing of it is on a network volume: it lives on
        the pod's own disk, which goes with the pod."""
        check_sandbox_id(machine_id, type(self))
        LEDGER.end(machine_id, MachineStatus.TERMINATED)
        stop_forwards(self.name, machine_id)
        # one listing serves both steps below; it is fetched while the agent's end runs
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="seer-teardown") as pool:
            listing = pool.submit(self._seer_pods)
            with contextlib.suppress(Exception):  # the pod may be stopped, gone or unreachable
                self._end_in_pod(machine_id, lambda: listing.result().get(machine_id, []))
            pods = listing.result().get(machine_id, [])
        self._terminate_pods(machine_id, pods)
        _TERMINATED.add(machine_id)
        with contextlib.suppress(OSError):
            (_folder("keys") / machine_id).unlink(missing_ok=True)

    def _end_in_pod(self, machine_id: str, pods: Callable[[], Sequence[dict[str, Any]]]) -> None:
        """The remote agent's ``end``: the sandbox's processes killed, its folder removed. At once
        over this process's open connection to the pod (it answers, so it runs); otherwise once
        ``pods`` (the account's listing) or the API says the pod runs: a stopped pod's SSH port
        would be waited on for the connect timeout."""
        record = LEDGER.read(machine_id) or {}
        if not (record.get("ssh") and record.get("base") and (_folder("keys") / machine_id).is_file()):
            return
        options = SshOptions.model_validate(record["ssh"])
        if not connected(options):
            pod_id = record.get("pod_id")
            pod = next((p for p in pods() if p.get("id") == pod_id and "desiredStatus" in p), None)
            if pod is None and pod_id:
                pod = api.sdk().get_pod(pod_id)
            if pod is None or pod.get("desiredStatus") != "RUNNING":
                return
        agent(connect(options), "end", record["base"], machine_id, "terminated", timeout=60)


#: How long the start waits between looks at a booting pod: first (for ``_POLL_STEADY``
#: seconds), and at most (backing off by half each time after that).
_POLL_FIRST = 0.2
_POLL_STEADY = 10.0
_POLL_MAX = 3.0

#: Why hidden models and a network volume do not go together.
_HIDDEN_ON_VOLUME = (
    "a sandbox with hidden models cannot mount a network volume: every pod on the volume, root as "
    "the agent is, reads its shared model cache, whose folders name the models cached there "
    "(models--<org>--<name>) and whose files match a hidden copy byte for byte, so the agent could "
    "identify its hidden model. Leave network_volume_id out (the hidden model is then downloaded "
    "into the pod's own disk, removed with the pod)"
)


def _hidden_problems(config: SandboxConfig) -> list[ConfigProblem]:
    if not any(m.hidden for m in config.models):
        return []
    options = config.provider_options or {}
    if not options.get("network_volume_id"):
        return []
    return [ConfigProblem("provider_options.network_volume_id", _HIDDEN_ON_VOLUME)]


def _shared_links(options: RunPodOptions) -> dict[str, str]:
    """How a new pod's sandboxes reach the caches they share (:data:`_SHARED`) on the volume:
    symbolic links from the sandboxes' folder (:meth:`RunPodOptions.base_dir`) when that is
    elsewhere (a network volume: a sandbox's own files stay on the pod's disk), ``{link:
    target}`` for the agent's ``begin``, which makes the targets private (0700) first."""
    base, shared = options.base_dir(), options.shared_dir()
    if base == shared:
        return {}
    return {posixpath.join(base, name): posixpath.join(shared, name) for name in _SHARED}


#: The data centre of each network volume this process rented a pod on: a volume never moves.
_VOLUME_DATA_CENTERS: dict[str, str] = {}


def _volume_data_center(runpod: Any, volume_id: str | None) -> str | None:
    """The data centre holding network volume ``volume_id``, which a pod on it must be rented in.
    The runpod SDK asks the account for it (``myself``) on every ``create_pod`` that is not told;
    asked here once per process and volume instead, one API call less on every later start."""
    if volume_id is None:
        return None
    if volume_id not in _VOLUME_DATA_CENTERS:
        for volume in (runpod.get_user() or {}).get("networkVolumes") or []:
            if volume.get("id") and volume.get("dataCenterId"):
                _VOLUME_DATA_CENTERS[str(volume["id"])] = str(volume["dataCenterId"])
    return _VOLUME_DATA_CENTERS.get(volume_id)


def connect_lazily(options: SshOptions) -> Connection:
    """The pooled connection for ``options``, connected on first use (a pod that is gone is then
    a clear error from the machine, not from attaching)."""
    try:
        return connect(options)
    except SshConnectError:
        return Connection(options)


#: The ledger of this client's runpod sandboxes: ``$SEER_HOME/runpod/sandboxes/<id>.json``.
LEDGER = Ledger(RunPodProvider)

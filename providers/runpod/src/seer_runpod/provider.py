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
import re
import secrets
import time
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from seer.config import GPU_CATALOGUE, SandboxConfig
from seer.errors import ConfigProblem, SandboxError, SandboxNotFoundError
from seer.ids import check_sandbox_id
from seer.providers.base import Availability, Capabilities, MachineInfo, MachineSpec, MachineStatus, Provider
from seer.providers.kit import Ledger
from seer.state import private_dir, seer_home
from seer_ssh.connection import Connection, HostKeyError, SshConnectError, connect
from seer_ssh.forward import stop_forwards
from seer_ssh.machine import SshMachine, provision
from seer_ssh.options import SshOptions

from seer_runpod import api
from seer_runpod.options import RunPodOptions

__all__ = ["RunPodMachine", "RunPodProvider"]

#: What the pod runs after its sandbox ended at its timeout (see :mod:`seer_runpod.watchdog`).
TERMINATE_SOURCE = resources.files("seer_runpod").joinpath("watchdog.py").read_text()
#: Pods seer makes are named ``seer-<sandbox id>``.
_POD_NAME = re.compile(r"^seer-(runpod-[0-9a-f]{12})$")
#: Characters the runpod SDK cannot send in an env value (it writes them into GraphQL unescaped).
_UNSENDABLE = ('"', "\\", "\n", "\r")


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


def _gpu_label(pod: dict[str, Any]) -> str:
    """``2 x A100 PCIe`` (RunPod's display name) or ``cpu``."""
    name = (pod.get("machine") or {}).get("gpuDisplayName")
    count = int(pod.get("gpuCount") or 0)
    return f"{count} x {name}" if name and count else "cpu"


class RunPodMachine(SshMachine):
    """A sandbox in a RunPod pod: seer-ssh's machine, its status from the API."""

    provider_name = "runpod"

    def _pod_running(self) -> bool | None:
        """Whether the API says the pod runs (None: the API cannot be asked)."""
        pod_id = self.record.get("pod_id")
        try:
            pod = api.sdk().get_pod(pod_id) if pod_id else None
        except Exception:
            return None
        return pod is not None and pod.get("desiredStatus") == "RUNNING"

    def gone(self) -> bool:
        return self._pod_running() is False

    def status(self) -> MachineStatus:
        if self._pod_running() is False:
            return LEDGER.settle(self.id, self.expires_at)
        return super().status()


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
        for name, value in {**spec.env, **spec.secrets}.items():
            if any(c in value for c in _UNSENDABLE):
                what = "secret" if name in spec.secrets else "env"
                raise SandboxError(
                    f"{what} {name}: its value holds a quote, backslash or newline, which the runpod "
                    "SDK cannot send as pod environment"
                )
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
        )
        assert isinstance(machine, RunPodMachine)
        machine.record.update(pod_id=pod_id, ssh=ssh.model_dump())
        LEDGER.update(sandbox_id, **{k: v for k, v in machine.record.items() if k != "status"})
        return machine

    def _reach(
        self, runpod: Any, sandbox_id: str, pod_id: str, options: RunPodOptions
    ) -> tuple[Connection, SshOptions]:
        """The pod's SSH connection, once it answers (within ``startup_timeout``)."""
        deadline = time.monotonic() + options.startup_timeout
        last = "the pod has no SSH port yet"
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
            time.sleep(1.0)
        raise SandboxError(f"pod {pod_id} did not answer over SSH in {options.startup_timeout:g} s: {last}")

    def _machine(self, sandbox_id: str, record: dict[str, Any]) -> RunPodMachine:
        ssh = SshOptions.model_validate(record["ssh"])
        return RunPodMachine(connect_lazily(ssh), sandbox_id, record, LEDGER)

    def attach(self, machine_id: str) -> RunPodMachine:
        check_sandbox_id(machine_id, type(self))
        record = LEDGER.read(machine_id)
        if record is None or not record.get("ssh"):
            raise SandboxNotFoundError(f"no runpod sandbox {machine_id!r} made by this client")
        return self._machine(machine_id, record)

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
            running = pod.get("desiredStatus") == "RUNNING"
            status = MachineStatus.RUNNING if running else LEDGER.ended_status(record, None)
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
                        "runpod.gpu": _gpu_label(pod),
                        "runpod.cost_per_hr": f"{cost_per_hr:.3f}",
                        "runpod.cost_so_far": f"{cost_per_hr * uptime / 3600:.4f}",
                    },
                )
            )
        return LEDGER.machines(live)

    def _terminate_pods(self, sandbox_id: str) -> None:
        runpod = api.sdk()
        record = LEDGER.read(sandbox_id) or {}
        pod_ids = {p["id"] for p in self._seer_pods().get(sandbox_id, [])}
        if record.get("pod_id") and runpod.get_pod(record["pod_id"]) is not None:
            pod_ids.add(record["pod_id"])
        for pod_id in pod_ids:
            runpod.terminate_pod(pod_id)

    def terminate(self, machine_id: str) -> None:
        check_sandbox_id(machine_id, type(self))
        LEDGER.end(machine_id, MachineStatus.TERMINATED)
        stop_forwards(self.name, machine_id)
        self._terminate_pods(machine_id)
        with contextlib.suppress(OSError):
            (_folder("keys") / machine_id).unlink(missing_ok=True)


def connect_lazily(options: SshOptions) -> Connection:
    """The pooled connection for ``options``, connected on first use (a pod that is gone is then
    a clear error from the machine, not from attaching)."""
    try:
        return connect(options)
    except SshConnectError:
        return Connection(options)


#: The ledger of this client's runpod sandboxes: ``$SEER_HOME/runpod/sandboxes/<id>.json``.
LEDGER = Ledger(RunPodProvider)

"""The ``ssh`` provider: a sandbox is a folder and processes on a host of your own, over SSH.

``create`` connects (strict host keys, key file or agent), makes the sandbox's folder, starts its
watchdog (so it ends at its timeout whether or not a client is there), and makes or reuses the
Python environment of its package set; see :mod:`seer_ssh.machine` for the layout on the host.

Two ledgers say which sandboxes exist: the kit's client-side one (``$SEER_HOME/ssh/sandboxes/``:
what this client made, how to reach each, ``terminated`` told from ``expired``/``lost``) and the
remote one on each host (``<base>/sandboxes/<id>/meta.json``), which any client that can log in
reads. ``list`` asks every host this client knows (its ledger's, the hosts file's and
``$SEER_SSH_HOSTS``), so ``seer ls`` and ``seer down`` find sandboxes after a client crash, from
a fresh ``$SEER_HOME`` too.
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, TypeVar

from pydantic import ValidationError
from seer.config import GPU_CATALOGUE, SandboxConfig
from seer.errors import ConfigProblem, SandboxError, SandboxNotFoundError
from seer.ids import check_sandbox_id
from seer.providers.base import (
    Availability,
    Capabilities,
    MachineInfo,
    MachineSpec,
    MachineStatus,
    Provider,
)
from seer.providers.kit import Ledger, gpu_matches

from seer_ssh import code_server
from seer_ssh.connection import Connection, SshConnectError, connect
from seer_ssh.forward import stop_forwards
from seer_ssh.machine import SshMachine, agent, provision, remote_sandboxes
from seer_ssh.options import SshOptions, command_line_hosts

OptionsT = TypeVar("OptionsT", bound=SshOptions)

__all__ = ["SshProvider", "hidden_model_problems", "login_checks", "paramiko_availability", "remote_gpus"]


def remote_gpus(conn: Connection) -> tuple[list[str], str]:
    """The host's NVIDIA GPUs by ``nvidia-smi`` (cached per connection), and why none if so."""
    cached = getattr(conn, "_seer_gpus", None)
    if cached is None:
        code, out, err = conn.run("nvidia-smi --query-gpu=name --format=csv,noheader", timeout=60)
        names = [line.strip() for line in out.splitlines() if line.strip()] if code == 0 else []
        why = (
            ""
            if names
            else (
                "nvidia-smi is not installed there"
                if code == 127
                else (err.strip() or out.strip() or "nvidia-smi lists no GPU")
            )
        )
        cached = (names, why)
        conn._seer_gpus = cached  # type: ignore[attr-defined]
    return cached


def host_problems(config: SandboxConfig, options: SshOptions, conn: Connection) -> list[ConfigProblem]:
    """What a host lacks for ``config``: the GPUs asked for, the system packages named."""
    problems = []
    if config.gpu is not None:
        names, why = remote_gpus(conn)
        fitting = [n for n in names if gpu_matches(config.gpu, n)]
        if not names:
            problems.append(
                ConfigProblem(
                    "gpu",
                    f"gpu={config.gpu!r} asked for, but {options.address} has no NVIDIA GPU ({why}); "
                    "use gpu=None for a CPU sandbox, or another host",
                )
            )
        elif len(fitting) < config.gpu_count:
            problems.append(
                ConfigProblem(
                    "gpu",
                    f"{config.gpu_count} x {config.gpu} asked for, but {options.address} has "
                    f"{len(fitting)} (its GPUs: {', '.join(names)})",
                )
            )
    for i, pkg in enumerate(config.system_packages):
        name = str(pkg).split("=", 1)[0]
        quoted = shlex.quote(name)
        code, out, _ = conn.run(f"dpkg-query -W -f='${{Status}}' {quoted} 2>/dev/null || command -v {quoted}")
        if code != 0 or not ("install ok installed" in out or out.strip().startswith("/")):
            problems.append(
                ConfigProblem(
                    f"system_packages[{i}]",
                    f"{name!r} is not installed on {options.address}, and seer-ssh installs no system "
                    f"packages (capability: installs_system_packages): install it there "
                    f"(sudo apt-get install {name}) or remove it",
                )
            )
    return problems


def paramiko_availability(extra: str) -> Availability:
    """Usable where paramiko is installed; else why not, naming ``seer[<extra>]``."""
    try:
        import paramiko  # noqa: F401
    except ImportError:
        return Availability(False, f"paramiko is not installed (pip install 'seer[{extra}]')")
    return Availability(True)


def login_checks(
    config: SandboxConfig,
    problems: list[ConfigProblem],
    options_model: type[OptionsT],
    *,
    login: Callable[[OptionsT], SshOptions] | None = None,
    provider: str = "ssh",
) -> tuple[OptionsT, Connection] | None:
    """The checks of a provider reached over SSH (seer-ssh, seer-slurm) before those of its own:
    its options resolved, hidden models refused unless allowed, the host (``login(options)``)
    reached. Appends what is wrong to ``problems``; returns the options and the connection when
    the host's own checks can go on, else None."""
    if any(p.field == "provider" or p.field.startswith("provider_options") for p in problems):
        return None
    try:
        options = options_model.resolve(config.provider_options)
    except (ValidationError, ValueError) as exc:
        problems.append(ConfigProblem("provider_options", str(exc)))
        return None
    problems += hidden_model_problems(config, options, provider=provider)
    try:
        conn = connect(login(options) if login else options)
    except SshConnectError as exc:
        problems.append(ConfigProblem("provider_options.host", str(exc)))
        return None
    return options, conn


def hidden_model_problems(
    config: SandboxConfig, options: SshOptions, *, provider: str = "ssh"
) -> list[ConfigProblem]:
    """Hidden models, refused unless ``allow_unisolated_hidden_models``: every sandbox on the host
    runs as the login user, so its agent reads what that user reads. The host's shared model
    cache holds models under their names, and names each blob by its content's sha256, so the
    agent could hash its hidden model's files and look them up; other sandboxes' folders (their
    secrets, and their models keys while those are being handed over) and the user's own files
    are open to it too. seer cannot keep the guarantee there, so it does not pretend to. seer-slurm
    uses it too (``provider="slurm"``): a job runs as the login user on the shared filesystem."""
    if options.allow_unisolated_hidden_models:
        return []
    return [
        ConfigProblem(
            f"models[{i}].hidden",
            f"the {provider} provider cannot hide a model's identity: every sandbox on "
            f"{options.address} runs as {options.user}, so the agent can read what {options.user} "
            f"can there (the shared model cache {options.base_dir}/hf-hub, where a model fetched "
            "openly sits under its name and its files' hashes, other sandboxes' folders, your "
            "files). Use a provider that isolates the sandbox (docker, modal), or set "
            "provider_options allow_unisolated_hidden_models=True to run it knowing that a "
            "determined agent can find the model's name",
        )
        for i, model in enumerate(config.models)
        if model.hidden
    ]


class SshProvider(Provider):
    """Sandboxes on hosts reached over SSH."""

    name: ClassVar[str] = "ssh"
    id_pattern: ClassVar[str] = r"ssh-[0-9a-f]{12}"
    description: ClassVar[str] = "a GPU box of your own over SSH: one connection, a lifetime held on the host"
    capabilities: ClassVar[Capabilities] = Capabilities(
        gpu_types=frozenset(GPU_CATALOGUE),
        max_gpu_count=16,
        volumes=True,  # the model cache on the host outlives sandboxes
        port_exposure="ssh-forward",
        # every sandbox runs as the login user: it can read what that user can (see
        # hidden_model_problems), so hidden models are refused unless the config accepts that
        hides_models=False,
        # code-server once per host, in <base>/tools: installed there, or copied from the client
        # (provider_options.code_server_from); see seer_ssh.code_server
        code_server=True,
    )
    options_model = SshOptions
    #: the machine class (seer-runpod's subclass sets its own)
    machine_cls: ClassVar[type[SshMachine]] = SshMachine

    @classmethod
    def availability(cls) -> Availability:
        return paramiko_availability("ssh")

    @classmethod
    def check_config(cls, config: SandboxConfig) -> list[ConfigProblem]:
        problems = super().check_config(config)
        reached = login_checks(config, problems, SshOptions)
        if reached is None:
            return problems
        options, conn = reached
        if not any(p.field.startswith("gpu") for p in problems):
            problems += host_problems(config, options, conn)
        problems += code_server.problems(config, options, conn)
        return problems

    def parse_options(self, config: SandboxConfig) -> SshOptions:
        return SshOptions.resolve(config.provider_options)

    # --- lifecycle ------------------------------------------------------------------------
    def create(self, spec: MachineSpec) -> SshMachine:
        options: SshOptions = spec.options
        conn = connect(options)
        base = conn.expand(options.base_dir)
        sandbox_id = f"ssh-{secrets.token_hex(6)}"
        LEDGER.begin(
            sandbox_id,
            name=spec.name,
            timeout=spec.timeout,
            labels=spec.labels,
            options=options.model_dump(),
            base=base,
        )
        try:
            spec.report(f"sandbox {sandbox_id} on {options.address}, in {base}")
            if spec.code_server and options.code_server_from:
                code_server.copy_prepared(conn, options, base, spec.report)
            machine = provision(conn, self.machine_cls, sandbox_id, spec, base=base, ledger=LEDGER)
            LEDGER.update(sandbox_id, **{k: v for k, v in machine.record.items() if k != "status"})
            return machine
        except BaseException:
            with contextlib.suppress(Exception):
                agent(conn, "end", base, sandbox_id, "terminated")
            LEDGER.forget(sandbox_id)
            raise

    def _locate(self, machine_id: str) -> tuple[Connection, dict[str, Any]] | None:
        """The connection to the host of ``machine_id`` and its record: from this client's
        ledger, else by asking every host it knows. None: no host has it."""
        record = LEDGER.read(machine_id)
        if record is not None and record.get("options") and record.get("base"):
            return connect(SshOptions.model_validate(record["options"])), record
        for options, conn in _reachable_hosts(known_hosts()):
            base = conn.expand(options.base_dir)
            found = remote_sandboxes(conn, base, machine_id)
            if found:
                found_record = {**found[0], "base": base, "options": options.model_dump()}
                LEDGER.update(machine_id, **found_record)
                return conn, found_record
        return None

    def attach(self, machine_id: str) -> SshMachine:
        check_sandbox_id(machine_id, type(self))
        located = self._locate(machine_id)
        if located is None:
            raise SandboxNotFoundError(f"no ssh sandbox {machine_id!r} on any host this client knows")
        conn, record = located
        return self.machine_cls(conn, machine_id, record, LEDGER)

    def list(self) -> list[MachineInfo]:
        live: list[MachineInfo] = []
        unreachable: set[str] = set()
        hosts = known_hosts()

        def one(options: SshOptions) -> list[MachineInfo]:
            conn = connect(options)
            base = conn.expand(options.base_dir)
            return [_info(meta, options, type(self).name) for meta in remote_sandboxes(conn, base)]

        with ThreadPoolExecutor(max_workers=max(1, min(8, len(hosts)))) as pool:
            results = {key: pool.submit(one, options) for key, options in hosts.items()}
            for key, future in results.items():
                try:
                    live += [m for m in future.result() if LEDGER.valid(m.id)]
                except (SandboxError, OSError):
                    unreachable.add(key)
        # a sandbox on a host that cannot be reached now is not known to have ended
        alive_ids = {
            path.stem
            for path in LEDGER.dir.glob("*.json")
            if _host_key((LEDGER.read(path.stem) or {}).get("options")) in unreachable
        }
        return LEDGER.machines(live, alive=lambda sandbox_id: sandbox_id in alive_ids)

    def terminate(self, machine_id: str) -> None:
        check_sandbox_id(machine_id, type(self))
        LEDGER.end(machine_id, MachineStatus.TERMINATED)
        stop_forwards(type(self).name, machine_id)
        located = self._locate(machine_id)
        if located is not None:
            conn, record = located
            agent(conn, "end", record["base"], machine_id, "terminated")


def _host_key(options: Any) -> str:
    return SshOptions.model_validate(options).model_dump_json() if options else ""


def known_hosts() -> dict[str, SshOptions]:
    """Every host this client knows: those of its ledger's records, the hosts file's and
    ``$SEER_SSH_HOSTS``'s."""
    hosts: dict[str, SshOptions] = {}
    for path in LEDGER.dir.glob("*.json"):
        record = LEDGER.read(path.stem) or {}
        with contextlib.suppress(ValidationError, TypeError):
            if record.get("options"):
                options = SshOptions.model_validate(record["options"])
                hosts[options.model_dump_json()] = options
    for options in command_line_hosts():
        hosts[options.model_dump_json()] = options
    return hosts


def _reachable_hosts(hosts: dict[str, SshOptions]) -> list[tuple[SshOptions, Connection]]:
    out = []
    for options in hosts.values():
        with contextlib.suppress(SandboxError, OSError):
            out.append((options, connect(options)))
    return out


def _info(meta: dict[str, Any], options: SshOptions, provider: str) -> MachineInfo:
    labels = {**meta.get("labels", {}), "seer.ssh.host": options.address}
    return MachineInfo(
        str(meta.get("id")),
        provider,
        str(meta.get("name") or meta.get("id")),
        MachineStatus(meta.get("status", "lost")),
        float(meta.get("created_at") or 0),
        meta.get("expires_at"),
        labels,
    )


#: The ledger of this client's ssh sandboxes: ``$SEER_HOME/ssh/sandboxes/<id>.json``.
LEDGER = Ledger(SshProvider)

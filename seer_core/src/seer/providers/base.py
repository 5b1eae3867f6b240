"""The provider contract: how to get a machine and talk to it.

A provider implements two small ABCs. :class:`Provider` creates, attaches to, lists and
terminates machines; :class:`Machine` runs commands, moves files and exposes ports in one of them.
Everything seer does *inside* a machine (packages, repos, models, Jupyter, RPC) is core code
written once on top of these primitives (see :mod:`seer.sandbox.bootstrap`), so a provider stays small.

:mod:`seer.testing.conformance` holds the contract suite every provider must pass.
"""

from __future__ import annotations

import enum
import io
import posixpath
import shlex
import tarfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from seer.errors import CapabilityError, ConfigProblem, ExecError, SandboxError
from seer.ids import SAFE_ID

if TYPE_CHECKING:
    from pydantic import BaseModel

    from seer.config import RepoConfig, SandboxConfig

__all__ = [
    "DETAIL_LABEL",
    "Availability",
    "Capabilities",
    "ExecResult",
    "Machine",
    "MachineInfo",
    "MachineSpec",
    "MachineStatus",
    "OutputCallback",
    "ProcessInfo",
    "Provider",
    "Snapshot",
]

#: Called with ``("stdout" | "stderr", text)`` as a command produces output.
OutputCallback = Callable[[str, str], None]
Command = str | Sequence[str]


class MachineStatus(enum.StrEnum):
    """Where a machine is in its life."""

    RUNNING = "running"
    STARTING = "starting"  #: running, but ``Sandbox.start()`` has not finished bootstrapping it
    TERMINATED = "terminated"  #: terminate() was called
    EXPIRED = "expired"  #: its timeout passed and it tore itself down
    LOST = "lost"  #: it died without tearing down (seer cleaned up what it found)
    #: its machine was stopped (not ended) outside seer, e.g. a RunPod pod stopped through the
    #: API: it may still bill and can be resumed, so it is listed and terminated like a live one
    STOPPED = "stopped"

    @property
    def alive(self) -> bool:
        """Running, starting or stopped: the machine still exists (it can do work, soon will,
        or could again), so ``seer ls`` lists it and ``seer down`` ends it."""
        return self in (MachineStatus.RUNNING, MachineStatus.STARTING, MachineStatus.STOPPED)


@dataclass(frozen=True)
class Capabilities:
    """What a provider can do. Tests and core check these instead of provider names."""

    #: GPU names (from :data:`seer.config.GPU_CATALOGUE` or the provider's own) it can give.
    gpu_types: frozenset[str] = frozenset()
    max_gpu_count: int = 0
    snapshots: bool = False
    #: persistent volumes (a shared model cache that outlives machines)
    volumes: bool = False
    #: how a port in the machine reaches the client: loopback, published, ssh-forward, tunnel
    port_exposure: str = "loopback"
    #: the longest ``timeout`` it accepts, in seconds (None: no limit of its own)
    max_lifetime: int | None = None
    #: installs ``system_packages`` (otherwise they are only checked)
    installs_system_packages: bool = False
    #: keeps a hidden model's identity from the agent: the agent cannot read the client's files,
    #: and a machine made with ``MachineSpec.private_model_cache`` sees no model cache shared with
    #: other sandboxes (where models sit under their real names); without it, core warns at start
    hides_models: bool = False
    #: builds the machine's image from a repository's ``RepoConfig.dockerfile`` (otherwise a config
    #: naming one is refused before anything is made, rather than the file silently ignored)
    dockerfile_repos: bool = False
    #: starts a VS Code server for ``SandboxConfig.debug`` and records its URL as the sandbox's
    #: ``code_server_url`` service (otherwise ``debug=True`` is refused before anything is made)
    code_server: bool = False


@dataclass(frozen=True)
class Availability:
    """Whether a provider can be used on this machine, and why not."""

    usable: bool
    reason: str = ""


@dataclass
class MachineSpec:
    """What core asks a provider to create. Secrets travel apart from ``env`` and never print."""

    name: str
    timeout: int
    gpu: str | None = None
    gpu_count: int = 1
    python_packages: list[str] = field(default_factory=list)
    system_packages: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict, repr=False)
    labels: dict[str, str] = field(default_factory=dict)
    options: Any = None
    snapshot: Snapshot | None = None
    #: the config's repositories; core clones them after provisioning, but a provider that builds
    #: images uses the ones naming a ``dockerfile`` to build the machine's image
    repos: list[RepoConfig] = field(default_factory=list)
    #: the config has hidden models: give the machine a model cache of its own, not one shared with
    #: other sandboxes, whose folder names and blobs would let the agent identify them
    private_model_cache: bool = False
    #: the config has ``debug=True``: core's ``debug`` step installs code-server into
    #: :meth:`Machine.tools_dir` unless it is there, so a provider that builds images installs it
    #: in a layer of its own (:mod:`seer.providers.code_server`) and every start finds it
    code_server: bool = False
    #: called with lines of provisioning output (an image build, a pull) as they come
    progress: Callable[[str], None] | None = field(default=None, repr=False, compare=False)

    def report(self, text: str) -> None:
        """Pass a line of provisioning output to :attr:`progress`, if anyone listens."""
        if self.progress is not None and text.strip():
            self.progress(text.strip())


#: The label of :attr:`MachineInfo.labels` whose value ``seer ls`` shows in its DETAIL column: one
#: short line of the provider's own about the machine (seer-slurm: the job's state, node, elapsed
#: time and limit).
DETAIL_LABEL = "seer.detail"


@dataclass(frozen=True)
class MachineInfo:
    """A machine as :meth:`Provider.list` reports it."""

    id: str
    provider: str
    name: str
    status: MachineStatus
    created_at: float
    expires_at: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The info as a JSON-able dict (what ``seer ls --json`` prints)."""
        return {
            "id": self.id,
            "provider": self.provider,
            "name": self.name,
            "status": self.status.value,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "labels": dict(self.labels),
        }


@dataclass(frozen=True)
class ProcessInfo:
    """A background process started with :meth:`Machine.start_process`."""

    name: str
    pid: int | None
    command: str
    log_path: str


@dataclass(frozen=True)
class Snapshot:
    """A saved machine state, restorable with ``Sandbox.from_snapshot``. JSON-serialisable."""

    provider: str
    id: str
    description: str
    created_at: float
    sandbox_id: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The snapshot as a JSON-able dict, kept in records; :meth:`from_dict` reads it back."""
        return {
            "provider": self.provider,
            "id": self.id,
            "description": self.description,
            "created_at": self.created_at,
            "sandbox_id": self.sandbox_id,
            "data": dict(self.data),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        """The snapshot a :meth:`to_dict` dict describes."""
        return cls(**{**data, "data": dict(data.get("data", {}))})


@dataclass(frozen=True)
class ExecResult:
    """The outcome of a command. ``str(result)`` is its combined output."""

    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the command exited 0."""
        return self.exit_code == 0

    @property
    def output(self) -> str:
        """stdout followed by stderr."""
        return self.stdout + self.stderr

    def check(self) -> ExecResult:
        """Return self, or raise :class:`~seer.errors.ExecError` if the exit code is not 0."""
        if not self.ok:
            raise ExecError(self.command, self.exit_code, self.stdout, self.stderr)
        return self

    def __str__(self) -> str:
        return self.output


def command_text(command: Command) -> str:
    """A command as one shell-readable string (for messages and logs)."""
    return command if isinstance(command, str) else shlex.join(command)


class Machine(ABC):
    """A running machine: one sandbox's compute. Paths are POSIX paths inside the machine;
    a relative path is relative to :attr:`workdir`."""

    #: the provider's id for this machine (also the sandbox id)
    id: str
    #: the sandbox's working directory inside the machine
    workdir: str
    #: the Python interpreter inside the machine that has ``python_packages`` and seer's runtime
    python: str
    #: True when create() already installed ``python_packages`` (a provider fast path)
    packages_installed: bool = False

    # --- commands -------------------------------------------------------------------------
    @abstractmethod
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
        """Run a command to completion. A string runs through ``bash -c``; a list is argv.

        Raises :class:`~seer.errors.ExecTimeoutError` (with partial output) after ``timeout``
        seconds, having killed the command and its children. A non-zero exit is *not* an error
        here: see :meth:`ExecResult.check`.
        """

    @abstractmethod
    def start_process(
        self,
        command: Command,
        *,
        name: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ProcessInfo:
        """Start a background process that outlives this call (and the client); its output
        goes to a log file in the machine. ``name`` must be unique among running processes."""

    @abstractmethod
    def process_running(self, name: str) -> bool:
        """Whether the background process ``name`` is still running."""

    @abstractmethod
    def stop_process(self, name: str, *, grace: float = 5.0) -> None:
        """Stop a background process (TERM, then KILL after ``grace`` s). Idempotent."""

    def process_log(self, name: str, *, lines: int | None = None) -> str:
        """The last ``lines`` of a background process's log (all of it if None)."""
        text = self.read_bytes(self.log_path(name)).decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:]) if lines else text

    def log_path(self, name: str) -> str:
        """Where the log of the background process ``name`` lives in the machine."""
        return posixpath.join(self.workdir, ".seer", "logs", f"{name}.log")

    def log_names(self) -> list[str]:
        """The names :meth:`process_log` can read (``seer logs`` shows them all): one per
        background process, plus any log the provider keeps of its own (setup, supervisor).

        The default lists the ``*.log`` files next to :meth:`log_path` with one ``find`` over
        exec, so it finds nothing once the machine is gone; a provider whose logs outlive the
        machine overrides it to list them without exec.
        """
        log_dir = posixpath.dirname(self.log_path("_"))
        try:
            result = self.exec(["find", log_dir, "-maxdepth", "1", "-type", "f", "-name", "*.log"])
        except SandboxError:
            return []
        if not result.ok:
            return []
        return sorted(posixpath.basename(p)[: -len(".log")] for p in result.stdout.splitlines() if p)

    # --- files ----------------------------------------------------------------------------
    @abstractmethod
    def write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        """Write a file, creating parent directories."""

    @abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """Read a file. Raises FileNotFoundError if it is not there."""

    def make_dirs(self, path: str) -> None:
        """Create a directory and its parents (no error if it exists)."""
        self.exec(["mkdir", "-p", self.resolve(path)]).check()

    def put_dir(self, local_dir: str | Path, remote_dir: str) -> None:
        """Copy a local directory's contents into ``remote_dir`` (default: one tar over exec)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(str(local_dir), arcname=".")
        remote = self.resolve(remote_dir)
        self.exec(
            f"mkdir -p {shlex.quote(remote)} && tar -xzf - -C {shlex.quote(remote)}", stdin=buf.getvalue()
        ).check()

    def get_dir(self, remote_dir: str, local_dir: str | Path) -> None:
        """Copy a directory out of the machine into ``local_dir``."""
        remote = self.resolve(remote_dir)
        tmp = posixpath.join("/tmp", f"seer-get-{time.monotonic_ns()}.tar.gz")
        self.exec(["tar", "-czf", tmp, "-C", remote, "."]).check()
        try:
            data = self.read_bytes(tmp)
        finally:
            self.exec(["rm", "-f", tmp])
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(local_dir, filter="data")

    def existing_dirs(self, paths: list[str]) -> set[str]:
        """Which of ``paths`` (absolute) are directories in the machine (default: one exec). What
        teardown asks before it copies the research record out: nothing is fetched for a folder
        that is not there. A provider whose SDK can stat a path without starting a process
        overrides it."""
        listing = self.exec(
            ["bash", "-c", 'for d in "$@"; do if [ -d "$d" ]; then echo "$d"; fi; done', "_", *paths]
        ).check()
        return set(listing.stdout.splitlines())

    def resolve(self, path: str) -> str:
        """An absolute path in the machine: relative paths are taken from :attr:`workdir`."""
        return path if posixpath.isabs(path) else posixpath.normpath(posixpath.join(self.workdir, path))

    def model_cache_dir(self) -> str:
        """The Hugging Face hub cache models are fetched into, as an absolute path in the machine.

        Core runs the model fetcher with ``HF_HUB_CACHE`` set to it and sets it for everything run
        in the sandbox afterwards. The default is ``<workdir>/.cache/huggingface/hub``; a provider
        overrides it to point at a cache that outlives the machine (a volume, the host's cache).
        """
        return posixpath.join(self.workdir, ".cache", "huggingface", "hub")

    def tools_dir(self) -> str:
        """Where seer installs the tools a sandbox uses beside its Python environment (code-server,
        for ``SandboxConfig.debug``: :mod:`seer.sandbox.code_server`), as an absolute path in the
        machine. Each tool is installed there once and reused while it is there.

        The default, ``<workdir>/.seer/tools``, installs once per machine; a provider overrides it
        to point at a folder that outlives the machine (the host's cache, where an image layer put
        the tools), so a second sandbox installs nothing.
        """
        return posixpath.join(self.workdir, ".seer", "tools")

    # --- network and state ----------------------------------------------------------------
    @abstractmethod
    def expose_port(self, port: int) -> str:
        """A URL (``http://host:port``) through which the client reaches ``port`` in the machine."""

    def snapshot(self, description: str = "") -> Snapshot:
        """Save the machine's state. Providers with ``capabilities.snapshots`` override this."""
        raise CapabilityError("this provider cannot take snapshots (capability: snapshots)")

    @abstractmethod
    def status(self) -> MachineStatus:
        """The machine's status now."""

    def start_completed(self) -> None:
        """Called by ``Sandbox.start`` once bootstrap is done. Until then, a machine whose
        starting client dies should end itself promptly (a half-made sandbox serves no one) and
        ``Provider.list`` may report it ``starting``; from here on it outlives its client until
        its timeout. The default does nothing."""


class Provider(ABC):
    """Gets machines and finds them again. Subclasses set ``name`` and ``capabilities`` and are
    registered through the ``seer_register_providers`` hook."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: pydantic model validating ``SandboxConfig.provider_options`` (None: no options)
    options_model: ClassVar[type[BaseModel] | None] = None
    description: ClassVar[str] = ""
    #: The exact form of this provider's sandbox ids, a regular expression matched in full. Ids are
    #: checked against it wherever they enter (:mod:`seer.ids`), so set it as tight as the ids
    #: ``create`` makes; the default only keeps paths and options out.
    id_pattern: ClassVar[str] = SAFE_ID

    @classmethod
    def availability(cls) -> Availability:
        """Whether this provider can be used here (SDK importable, credentials found, ...)."""
        return Availability(True)

    @classmethod
    def check_config(cls, config: SandboxConfig) -> list[ConfigProblem]:
        """What in ``config`` this provider cannot honour, before anything is made.

        The default checks the GPU catalogue and count, the lifetime limit, what needs a
        capability (a repository's ``dockerfile``: ``dockerfile_repos``; ``debug``:
        ``code_server``) and the provider options; subclasses extend it (calling super) with what
        only they know.
        """
        caps = cls.capabilities
        problems: list[ConfigProblem] = []
        avail = cls.availability()
        if not avail.usable:
            problems.append(ConfigProblem("provider", f"{cls.name!r} cannot be used here: {avail.reason}"))
        if config.gpu is not None and config.gpu not in caps.gpu_types:
            offered = ", ".join(sorted(caps.gpu_types)) or "none"
            problems.append(
                ConfigProblem(
                    "gpu",
                    f"provider {cls.name!r} offers no {config.gpu!r} GPU; it offers: {offered}"
                    " (or None for CPU)",
                )
            )
        elif config.gpu is not None and config.gpu_count > caps.max_gpu_count:
            problems.append(
                ConfigProblem("gpu_count", f"provider {cls.name!r} gives at most {caps.max_gpu_count} GPUs")
            )
        if caps.max_lifetime is not None and config.timeout > caps.max_lifetime:
            problems.append(
                ConfigProblem("timeout", f"provider {cls.name!r} allows at most {caps.max_lifetime} s")
            )
        problems += cls._capability_problems(config)
        if not config.debug and config.provider_options.get("code_server_from") is not None:
            # inert, not wrong: warned, as ignored config fields are (seer.config.files); one
            # provider_options block often serves runs with and without debug (CI's does)
            import warnings

            warnings.warn(
                "provider_options.code_server_from is ignored: it is used only with debug=True "
                "(set debug=True, or drop the option to silence this)",
                UserWarning,
                stacklevel=2,
            )
        if cls.options_model is not None:
            from pydantic import ValidationError

            from seer.config import problems_from

            try:
                cls.options_model.model_validate(config.provider_options)
            except ValidationError as exc:
                problems += problems_from(exc, ("provider_options",))
        elif config.provider_options:
            problems.append(ConfigProblem("provider_options", f"provider {cls.name!r} takes no options"))
        return problems

    @classmethod
    def _capability_problems(cls, config: SandboxConfig) -> list[ConfigProblem]:
        """What ``config`` asks for that needs a capability this provider does not declare."""
        caps = cls.capabilities
        problems = []
        if not caps.dockerfile_repos:
            for i, repo in enumerate(config.repos):
                if repo.dockerfile:
                    problems.append(
                        ConfigProblem(
                            f"repos[{i}].dockerfile",
                            f"provider {cls.name!r} cannot build a machine image from a repository's "
                            "Dockerfile (capability: dockerfile_repos); remove dockerfile, or use a "
                            "provider that builds images (docker)",
                        )
                    )
        if config.debug and not caps.code_server:
            problems.append(
                ConfigProblem(
                    "debug",
                    f"provider {cls.name!r} cannot start a VS Code server (capability: code_server); "
                    "set debug to false and work through the sandbox's Jupyter server or shell, "
                    "or use a provider that has it (every provider seer ships does: local, docker, ssh, "
                    "slurm, runpod, modal)",
                )
            )
        return problems

    def parse_options(self, config: SandboxConfig) -> Any:
        """``config.provider_options`` validated into :attr:`options_model` (or None)."""
        if self.options_model is None:
            return None
        return self.options_model.model_validate(config.provider_options)

    @abstractmethod
    def create(self, spec: MachineSpec) -> Machine:
        """Make a machine from ``spec`` (restoring ``spec.snapshot`` if given) and return it
        running. On failure, leave nothing behind and raise."""

    @abstractmethod
    def attach(self, machine_id: str) -> Machine:
        """A handle on an existing machine. Raises :class:`~seer.errors.SandboxNotFoundError`."""

    @abstractmethod
    def list(self) -> list[MachineInfo]:
        """Every machine this provider knows of, including ones whose client is gone."""

    @abstractmethod
    def terminate(self, machine_id: str) -> None:
        """Tear a machine down. Idempotent: an unknown or already-dead machine is not an error."""

    def delete_snapshot(self, snapshot: Snapshot) -> None:
        """Remove a snapshot's stored state."""
        raise CapabilityError(f"provider {self.name!r} has no snapshots (capability: snapshots)")

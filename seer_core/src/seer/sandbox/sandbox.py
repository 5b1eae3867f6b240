"""``Sandbox``: a machine on some provider, bootstrapped from a :class:`SandboxConfig`.

``start()`` checks everything it can first (config, provider, secrets), then provisions the
machine and runs core bootstrap in it, one named step at a time: packages, files and repos
(:mod:`seer.sandbox.bootstrap`), models (:mod:`seer.sandbox.model_cache`), then the execution
mode. If a step fails, what was made is torn down and one :class:`~seer.errors.SandboxStartError`
says which step failed and why.

A started sandbox outlives the script that started it (until ``terminate()`` or its ``timeout``);
``Sandbox.attach(sandbox_id)`` finds it again from any process.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any

from seer import plugins
from seer.config import SandboxConfig
from seer.errors import (
    ConfigError,
    SandboxError,
    SandboxNotFoundError,
    SandboxNotRunningError,
    SandboxStartError,
    SeerError,
)
from seer.outputs import client_outputs_dir, copy_out, forget_copies, forget_ended_copy
from seer.preflight import preflight, sandbox_id_providers
from seer.progress import Progress
from seer.providers.base import (
    ExecResult,
    Machine,
    MachineSpec,
    MachineStatus,
    OutputCallback,
    ProcessInfo,
    Provider,
    Snapshot,
)
from seer.sandbox import bootstrap
from seer.sandbox.bootstrap import RepoHandle
from seer.sandbox.code_server import start_code_server
from seer.sandbox.execution_mode import ExecutionModePlugin
from seer.sandbox.model_cache import ModelHandle, prepare_models
from seer.sandbox.record import SandboxRecord
from seer.state import end_record, prune_records, read_json, record_path, records_dir, write_json

__all__ = ["RepoHandle", "Sandbox", "SandboxRecord"]


def _records() -> Path:
    return records_dir()


class Sandbox:
    """A sandbox on a provider. ``Sandbox(config).start()`` returns the started sandbox."""

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        progress: Progress | bool | None = None,
        record: SandboxRecord | None = None,
        machine: Machine | None = None,
    ):
        """``Sandbox(config)``: a sandbox to :meth:`start`. ``Sandbox(record=..., machine=...)``:
        one rebuilt from its :class:`~seer.sandbox.record.SandboxRecord` (what :meth:`attach` and
        :meth:`from_snapshot` use), holding ``machine`` when it runs already.

        ``progress``: where setup and teardown say what they do (stderr by default; ``False``
        silences it, as ``$SEER_QUIET=1`` does; a :class:`~seer.progress.Progress` of your own)."""
        if record is None:
            config = config if config is not None else SandboxConfig()
            record = SandboxRecord(provider=config.provider_name, config=config)
        elif config is not None:
            raise TypeError("Sandbox() takes a config or a record, not both")
        self.config = record.config
        self._machine = machine
        self._provider: Provider | None = None
        self._provider_name = record.provider
        self._name = record.name
        self._repos = list(record.repos)
        self._services = dict(record.services)
        #: variables core sets for everything run in the sandbox after provisioning (model paths, ...)
        self._env = dict(record.env)
        self._progress = progress if isinstance(progress, Progress) else Progress(enabled=progress)
        self._outputs_dir = record.outputs_dir
        self._created_at = record.created_at
        self._snapshot = record.snapshot

    # --- lifecycle ------------------------------------------------------------------------
    def start(self, name: str | None = None, *, quiet: bool = False) -> Sandbox:
        """Provision the machine and bootstrap it. Returns self.

        Each step (provisioning, packages, models, ...) and its download progress is reported on
        stderr; ``quiet=True`` keeps this start quiet (``Sandbox(config, progress=False)`` or
        ``$SEER_QUIET=1``: everything the sandbox reports).

        Raises :class:`~seer.errors.ConfigError` before anything is made if the config cannot
        run on the chosen provider (or a secret is missing), and
        :class:`~seer.errors.SandboxStartError` if a step fails (after tearing down).
        """
        if self._machine is not None:
            raise SandboxError(f"sandbox {self._machine.id} is already started")
        if name is not None and not name.strip():
            raise ConfigError("name: must not be empty")
        resolved = preflight(self.config)
        config = self.config = resolved.config
        # (One pass over the client records: expired ones scrubbed, ended ones' folders swept.)
        prune_records(ended=forget_ended_copy)
        provider = self._provider = resolved.provider()
        self._provider_name = resolved.provider_name
        mode_cls = resolved.execution_mode
        self._name = name or getattr(config, "name", None) or "sandbox"
        progress = Progress(enabled=False) if quiet else self._progress
        spec = MachineSpec(
            name=self._name,
            timeout=config.timeout,
            gpu=config.gpu,
            gpu_count=config.gpu_count,
            python_packages=bootstrap.with_required(
                config.python_packages,
                # The model fetcher runs in the sandbox and needs huggingface_hub there.
                [*mode_cls.required_packages, *(["huggingface_hub>=1"] if config.models else [])],
            ),
            system_packages=list(config.system_packages),
            env=dict(config.env),
            secrets=dict(resolved.secrets),
            labels={"seer.name": self._name},
            options=provider.parse_options(config),
            snapshot=self._snapshot,
            repos=list(config.repos),
            private_model_cache=any(m.hidden for m in config.models),
            code_server=config.debug,
            progress=progress.update,
        )
        step = "provision"
        try:
            with progress.step(f"Provisioning a sandbox on {provider.name}"):
                machine = self._machine = provider.create(spec)
            plugins.hook().seer_sandbox_provisioned(sandbox=self)
            # Each step takes what it needs and returns what it made; the sandbox records it.
            step = "packages"
            if config.python_packages and not machine.packages_installed:
                with progress.step("Installing Python packages"):
                    bootstrap.install_packages(machine, config.python_packages, progress)
            step = "files"
            if config.local_files or config.local_dirs:
                with progress.step("Copying local files"):
                    bootstrap.copy_local_files(machine, config)
            step = "repos"
            for repo in config.repos:
                with progress.step(f"Cloning {repo.url}"):
                    self._repos.append(bootstrap.clone_repo(machine, repo))
            step = "models"
            if config.models:
                with progress.step(f"Fetching {len(config.models)} model(s)"):
                    made = prepare_models(
                        machine,
                        config.models,
                        progress,
                        provider=provider.name,
                        hides_models=provider.capabilities.hides_models,
                    )
                self._env.update(made.env)
                self._services.update(made.services)
            step = "execution mode"
            with progress.step(f"Preparing {mode_cls.name} mode"):
                mode_cls().prepare(self)
            step = "debug"
            if config.debug:
                with progress.step("Starting VS Code (code-server)"):
                    self._services.update(start_code_server(machine, self._env, progress))
            step = "record"
            self._save_record()
            # Until here, a starter that dies takes the half-made sandbox with it.
            self._machine.start_completed()
        except BaseException as exc:
            sandbox_id = self._machine.id if self._machine else None
            self._abort(provider)
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            reason = str(exc) if isinstance(exc, SeerError) else f"{type(exc).__name__}: {exc}"
            raise SandboxStartError(step, reason, sandbox_id=sandbox_id) from exc
        plugins.hook().seer_sandbox_started(sandbox=self)
        return self

    def _provider_handle(self) -> Provider:
        """The provider this sandbox runs on: the one it started or was attached with."""
        if self._provider is None:
            self._provider = plugins.get_provider(self._provider_name)
        return self._provider

    def _abort(self, provider: Provider) -> None:
        if self._machine is None:
            return
        machine_id = self._machine.id
        try:
            provider.terminate(machine_id)
        finally:
            (_records() / f"{machine_id}.json").unlink(missing_ok=True)
            self._machine = None

    def terminate(
        self, save_snapshot: bool = False, snapshot_description: str = "", *, force: bool = False
    ) -> Snapshot | None:
        """Tear the sandbox down. Idempotent. With ``save_snapshot=True``, snapshot it first
        and return the :class:`Snapshot`.

        Before anything is deleted, the sandbox's ``notebooks/`` and ``outputs/`` are copied to
        :attr:`outputs_dir` on this machine (see :mod:`seer.outputs`), and one line on stderr says
        where. If that copy fails, nothing is torn down and :class:`~seer.errors.SandboxError`
        says why; ``force=True`` tears down anyway.
        """
        if self._machine is None:
            return None
        snap = None
        # Whether the machine still runs: asked first only where something must run before the
        # copy (a snapshot, an execution mode's flush). Otherwise the copy's own first step asks
        # (SandboxNotRunningError: nothing left to copy), one round trip less per teardown.
        mode = self._execution_mode()
        ask_first = save_snapshot or (mode is not None and type(mode).flush is not ExecutionModePlugin.flush)
        if not ask_first or self._machine.status().alive:
            if save_snapshot:
                snap = self.snapshot(snapshot_description)
            if ask_first:
                self._flush_execution_mode(mode)
            if self._keep_outputs(force):
                plugins.hook().seer_sandbox_terminating(sandbox=self)
        # Always ask the provider: it is idempotent and mops up what a dead machine left.
        self._provider_handle().terminate(self._machine.id)
        end_record(self._machine.id, self._machine.status().value)
        # No live document is left to write a client copy from: the copies' lock and record goes
        # (unless a writer still holds it: then the next start's sweep takes it).
        with contextlib.suppress(OSError):
            forget_copies(self.outputs_dir)
        return snap

    def _execution_mode(self) -> ExecutionModePlugin | None:
        try:
            return plugins.get_execution_mode(str(self.config.execution_mode))()
        except Exception as exc:
            self._progress.note(f"could not save everything before the copy: {exc}")
            return None

    def _flush_execution_mode(self, mode: ExecutionModePlugin | None) -> None:
        """Let the execution mode write out what it holds in memory (a notebook's live document)
        before the copy; what fails is noted, never a reason to keep the sandbox."""
        if mode is None:
            return
        try:
            mode.flush(self)
        except Exception as exc:
            self._progress.note(f"could not save everything before the copy: {exc}")

    def _keep_outputs(self, force: bool) -> bool:
        """Copy the notebooks and outputs to :attr:`outputs_dir`, or refuse to go on (unless
        ``force``), so the agent's record is never deleted silently. False: the machine had
        already ended (there is nothing left to copy)."""
        dest = self.outputs_dir
        try:
            kept = copy_out(self.machine, dest)
        except Exception as exc:
            # a machine that ended has nothing left to copy; one that is only stopped (a RunPod
            # pod its agent stopped) still holds the files: that is a copy that failed
            if isinstance(exc, SandboxNotRunningError) and not self._still_exists():
                return False
            why = f"could not copy the notebooks and outputs of sandbox {self.sandbox_id} to {dest}: {exc}"
            if not force:
                raise SandboxError(
                    f"{why}. Nothing was deleted: the sandbox is still running. Copy what you need "
                    "(sandbox.download_dir / seer exec), then terminate(force=True) or "
                    "`seer down --force` to delete it anyway"
                ) from exc
            self._progress.note(f"{why}; deleting it anyway (force)")
            return True
        if kept.files:
            self._progress.note(kept.summary(self.sandbox_id))
        return True

    def _still_exists(self) -> bool:
        """Whether the machine still exists (running or stopped), asked after a copy found it not
        running; a status that cannot be had counts as ended, as the copy said."""
        try:
            return self.machine.status().alive
        except Exception:
            return False

    def __enter__(self) -> Sandbox:
        if self._machine is None:
            self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.terminate()

    @classmethod
    def attach(cls, sandbox_id: str) -> Sandbox:
        """A handle on a sandbox started earlier (by this or another process).

        Raises :class:`~seer.errors.InvalidSandboxIdError` for an id of no installed provider's
        format (before looking at anything), :class:`~seer.errors.SandboxNotFoundError` for an
        id no provider knows.
        """
        candidates = sandbox_id_providers(sandbox_id)
        data = None
        with contextlib.suppress(OSError, ValueError):
            data = read_json(record_path(sandbox_id))
        # A record is a file: trust it only to name one of the providers the id can belong to.
        if isinstance(data, dict) and data.get("provider") in candidates:
            record = SandboxRecord.from_json(data)
            machine = plugins.get_provider(record.provider).attach(sandbox_id)
            return cls(record=record, machine=machine)
        for name, reg in plugins.providers().items():
            if name not in candidates or not reg.cls.availability().usable:  # type: ignore[attr-defined]
                continue
            provider = plugins.get_provider(name)
            try:
                machine = provider.attach(sandbox_id)
            except SandboxNotFoundError:
                continue
            return cls(
                record=SandboxRecord(provider=name, config=SandboxConfig(provider=name)), machine=machine
            )
        raise SandboxNotFoundError(f"no sandbox {sandbox_id!r} on any installed provider")

    @classmethod
    def from_snapshot(
        cls, snapshot: Snapshot | Mapping[str, Any], config: SandboxConfig, name: str | None = None
    ) -> Sandbox:
        """Start a new sandbox from a snapshot's state, with ``config``."""
        snap = snapshot if isinstance(snapshot, Snapshot) else Snapshot.from_dict(snapshot)
        if snap.provider != config.provider_name:
            raise ConfigError(
                f"provider: snapshot {snap.id} belongs to provider {snap.provider!r}, "
                f"but the config runs on {config.provider_name!r}"
            )
        return cls(record=SandboxRecord(provider=config.provider_name, config=config, snapshot=snap)).start(
            name=name
        )

    @property
    def record(self) -> SandboxRecord:
        """The sandbox's state as its record keeps it (a copy): ``Sandbox(record=...)`` rebuilds it."""
        return SandboxRecord(
            provider=self._provider_name,
            config=self.config,
            name=self._name,
            created_at=self._created_at,
            repos=list(self._repos),
            services=dict(self._services),
            env=dict(self._env),
            outputs_dir=self._outputs_dir,
            snapshot=self._snapshot,
        )

    def _save_record(self) -> None:
        self._created_at = self._created_at or time.time()
        self._outputs_dir = self.outputs_dir
        write_json(record_path(self.machine.id), self.record.to_json(self.machine.id))

    # --- state plugins and modes add to (public: seer's own modes use nothing else) ----------
    def set_service(self, key: str, value: Any) -> None:
        """Record something a bootstrap step, mode or plugin started in the sandbox (a URL, model
        handles, a session list) under ``key``; it is saved with the sandbox's record, so a later
        :meth:`attach` sees it in :attr:`services`. ``value`` must be JSON-serialisable."""
        self._services[key] = value
        if (_records() / f"{self.machine.id}.json").is_file():
            self._save_record()

    def add_env(self, env: Mapping[str, str]) -> None:
        """Set environment variables for everything run in the sandbox from now on (``exec``,
        background processes, kernels started later), on top of ``config.env``; saved with the
        record, so they hold after :meth:`attach` too. Model paths are set this way."""
        self._env.update(env)
        if (_records() / f"{self.machine.id}.json").is_file():
            self._save_record()

    @property
    def services(self) -> Mapping[str, Any]:
        """What steps, modes and plugins recorded with :meth:`set_service`, by key (read-only)."""
        return MappingProxyType(self._services)

    @property
    def env(self) -> Mapping[str, str]:
        """The variables added with :meth:`add_env` (read-only; ``config.env`` is apart)."""
        return MappingProxyType(self._env)

    @property
    def started(self) -> bool:
        """Whether this handle holds a machine: started (or attached) and not terminated."""
        return self._machine is not None

    # --- properties -----------------------------------------------------------------------
    @property
    def machine(self) -> Machine:
        """The provider's machine handle (for plugins and advanced use)."""
        if self._machine is None:
            raise SandboxNotRunningError("the sandbox is not started; call start() first")
        return self._machine

    @property
    def sandbox_id(self) -> str:
        """The sandbox's id (``local-1a2b3c4d5e``): what ``Sandbox.attach`` and ``seer`` commands take."""
        return self.machine.id

    @property
    def provider(self) -> str:
        """The name of the provider the sandbox runs on."""
        return self._provider_name

    @property
    def name(self) -> str | None:
        """The name given in the config or to ``start()``, if any."""
        return self._name

    @property
    def status(self) -> MachineStatus:
        """``running``, ``terminated``, ``expired`` or ``lost``; ``not started`` raises."""
        return self.machine.status()

    @property
    def outputs_dir(self) -> Path:
        """The folder on this machine that keeps the sandbox's notebooks and outputs (absolute):
        ``$SEER_OUTPUTS_DIR/<sandbox_id>/`` or ``./seer-outputs/<sandbox_id>/`` as it was when the
        sandbox started (stored in its record, so every process uses the same one)."""
        if self._outputs_dir is None:
            self._outputs_dir = client_outputs_dir(self.sandbox_id)
        return self._outputs_dir

    @property
    def workdir(self) -> str:
        """The working directory in the sandbox; relative paths are taken from here."""
        return self.machine.workdir

    @property
    def repo_handles(self) -> list[RepoHandle]:
        """The repositories cloned into the sandbox, in config order."""
        return list(self._repos)

    @property
    def model_handles(self) -> list[ModelHandle]:
        """The models fetched into the sandbox (empty when none are configured)."""
        return [ModelHandle.from_dict(d) for d in self._services.get("models", [])]

    @property
    def jupyter_url(self) -> str | None:
        """The Jupyter server's URL (with token), when the notebook mode started one."""
        return self._services.get("jupyter_url")

    @property
    def code_server_url(self) -> str | None:
        """The VS Code server's URL (code-server, opening the working directory), when
        ``debug=True`` started one. The browser asks once for :attr:`code_server_password`."""
        return self._services.get("code_server_url")

    @property
    def code_server_password(self) -> str | None:
        """The secret the VS Code server at :attr:`code_server_url` asks for (random per sandbox)."""
        return (self._services.get("code_server") or {}).get("password")

    # --- running things -------------------------------------------------------------------
    def exec(
        self,
        cmd: str | list[str],
        timeout: float | None = None,
        *,
        check: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        """Run a shell command (a string, through bash) or an argv list in the sandbox.

        ``str(result)`` is its output; ``result.exit_code``, ``.stdout`` and ``.stderr`` are
        there too. ``check=True`` raises :class:`~seer.errors.ExecError` on a non-zero exit.
        """
        result = self.machine.exec(
            cmd, timeout=timeout, env={**self._env, **(env or {})}, cwd=cwd, on_output=on_output
        )
        return result.check() if check else result

    def exec_python(
        self, code: str, timeout: float | None = None, *, check: bool = False, cwd: str | None = None
    ) -> ExecResult:
        """Run Python source with the sandbox's interpreter (fed on stdin, so any size works)."""
        result = self.machine.exec(
            [self.machine.python, "-"], timeout=timeout, stdin=code.encode(), cwd=cwd, env=self._env
        )
        return result.check() if check else result

    def start_process(
        self,
        command: str | list[str],
        *,
        name: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ProcessInfo:
        """Start a background process in the sandbox (it outlives this client); its output goes
        to a log (:meth:`process_log`)."""
        return self.machine.start_process(command, name=name, env={**self._env, **(env or {})}, cwd=cwd)

    def process_log(self, name: str, *, lines: int | None = None) -> str:
        """The last ``lines`` of a background process's log."""
        return self.machine.process_log(name, lines=lines)

    # --- files ----------------------------------------------------------------------------
    def write_file(self, path: str, content: str | bytes) -> None:
        """Write a file in the sandbox, creating its directory."""
        self.machine.write_bytes(path, content.encode() if isinstance(content, str) else content)

    def read_file(self, path: str) -> str:
        """Read a text file from the sandbox."""
        return self.machine.read_bytes(path).decode()

    def read_bytes(self, path: str) -> bytes:
        """Read a file from the sandbox as bytes."""
        return self.machine.read_bytes(path)

    def ensure_dir(self, path: str) -> None:
        """Create a directory (and parents) in the sandbox."""
        self.machine.make_dirs(path)

    def upload_file(self, local_path: str | os.PathLike[str], remote_path: str | None = None) -> str:
        """Copy a local file into the sandbox (default: its name, in the working directory).
        Returns the path in the sandbox."""
        return bootstrap.upload_file(self.machine, local_path, remote_path)

    def upload_dir(self, local_dir: str | os.PathLike[str], remote_dir: str | None = None) -> str:
        """Copy a local directory into the sandbox. Returns the path in the sandbox."""
        return bootstrap.upload_dir(self.machine, local_dir, remote_dir)

    def download_dir(self, remote_dir: str, local_dir: str | os.PathLike[str]) -> Path:
        """Copy a directory out of the sandbox."""
        self.machine.get_dir(remote_dir, Path(local_dir))
        return Path(local_dir)

    def snapshot(self, description: str = "") -> Snapshot:
        """Save the sandbox's files so ``Sandbox.from_snapshot`` can start from them."""
        return self.machine.snapshot(description)

    def __repr__(self) -> str:
        state = f"{self._machine.id}" if self._machine else "not started"
        return f"<Sandbox {state} on {self._provider_name}>"

"""The embedded ``local`` provider: a sandbox is a working directory plus processes on this machine.

Each sandbox lives in ``$SEER_HOME/local/<id>/``::

    meta.json       what the sandbox is (id, name, env, interpreter, deadline, supervisor pid)
    secrets.json    secret values, mode 0600, read only to run commands
    root/           the working directory (``Machine.workdir``)
    venv/           the sandbox's own Python environment (see :mod:`.env`)
    logs/           supervisor.log and one log per background process
    procs/          one JSON record per background process

A detached *supervisor* process (:mod:`seer.providers.local.supervisor`) owns the sandbox's lifetime:
it outlives the client, and when the ``timeout`` passes or ``terminate()`` signals it, it kills
every process the sandbox started (each carries ``SEER_SANDBOX_ID`` in its environment, so even
processes that left their session are found), keeps its ``notebooks/`` and ``outputs/`` on this
disk (:meth:`SandboxDir.keep_outputs`) and removes the working directory. If the supervisor
itself is gone, the next ``list()`` or ``attach()`` finds the sandbox ``lost`` and cleans it up, so
a dead sandbox is never reported as running.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from seer.config import GPU_CATALOGUE, SandboxConfig
from seer.errors import (
    ConfigError,
    ConfigProblem,
    InvalidSandboxIdError,
    SandboxNotFoundError,
    SandboxNotRunningError,
)
from seer.providers import procs
from seer.providers.base import (
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
from seer.providers.kit import OutputPump, detect_gpus, gpu_matches, pump_popen
from seer.providers.local.env import (
    ensure_layer,
    index_unreachable,
    make_sandbox_env,
    probe_interpreter,
    python_problem,
    requirement_names,
    unsatisfied,
)
from seer.providers.local.options import LocalOptions, python_choice
from seer.providers.local.sandbox_dir import (
    ID_PATTERN,
    SUPERVISOR_MODULE,
    RunningProof,
    SandboxDir,
    local_root,
)
from seer.providers.starter import starter_info
from seer.state import RECORD_TTL, open_private, private_dir, read_json, seer_home, write_json

#: Variables a local sandbox inherits from the client: locale, caches, proxies, package indexes.
#: Nothing else crosses, so a token in the client's environment stays out unless named in secrets.
PASSTHROUGH = (
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "TMPDIR",
    "SHELL",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "HF_ENDPOINT",
    "TRANSFORMERS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
    "XDG_CACHE_HOME",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_CERT",
    "PIP_DEFAULT_TIMEOUT",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    "UV_CACHE_DIR",
)


def _bash() -> str:
    return shutil.which("bash") or "/bin/sh"


def _argv(command: Command) -> list[str]:
    return [_bash(), "-c", command] if isinstance(command, str) else list(command)


def _system_package_installed(name: str) -> bool:
    pkg = name.split("=", 1)[0]
    dpkg = shutil.which("dpkg-query")
    if dpkg:
        out = subprocess.run([dpkg, "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        return out.returncode == 0 and "install ok installed" in out.stdout
    return shutil.which(pkg) is not None


def hf_hub_cache(env: Mapping[str, str]) -> str:
    """The hub cache huggingface_hub would use in a process with environment ``env``.

    ``HF_HUB_CACHE``, else ``HUGGINGFACE_HUB_CACHE`` (legacy), else ``HF_HOME/hub``, else
    ``XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``, with ``~`` and
    ``$VARS`` expanded as huggingface_hub does, but from ``env`` (and without importing it).
    """

    def expand(path: str) -> str:
        home = env.get("HOME") or str(Path.home())
        if path == "~" or path.startswith("~/"):
            path = home + path[1:]
        return re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda m: env.get(m[1] or m[2], m[0]), path)

    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(name):
            return os.path.abspath(expand(env[name]))
    hf_home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return os.path.abspath(os.path.join(expand(hf_home), "hub"))


def copy_tree_as_found(src: Path, dest: Path) -> None:
    """Copy the tree under ``src`` into ``dest`` as it is found while walking it: a file or folder
    that vanishes meanwhile (an editor's or Jupyter's temporary file renamed into place) is simply
    not copied, since a live sandbox's files change while they are read. Symlinks are copied as
    links. Raises FileNotFoundError only when ``src`` itself is not there."""
    if not src.is_dir():
        raise FileNotFoundError(src)
    for folder, dirs, files in os.walk(src):
        rel = Path(folder).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in [*files, *(d for d in dirs if (Path(folder) / d).is_symlink())]:
            source, target = Path(folder) / name, dest / rel / name
            with contextlib.suppress(FileNotFoundError):
                if source.is_symlink():
                    target.unlink(missing_ok=True)
                    target.symlink_to(os.readlink(source))
                else:
                    shutil.copy2(source, target)


class LocalMachine(Machine):
    """A handle on one local sandbox."""

    def __init__(self, sandbox: SandboxDir, meta: dict[str, Any], env: dict[str, str]):
        self._sb = sandbox
        self.id = sandbox.id
        self.workdir = str(sandbox.root)
        self.python = meta["python"]
        self.packages_installed = True
        self._env = env
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._running: RunningProof | None = None

    def keep_child(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        """Hold the handle of a process this client started for the sandbox (its supervisor), so
        it is reaped when it ends, not left a zombie."""
        self._children[name] = proc

    # --- commands -------------------------------------------------------------------------
    def _check_running(self) -> None:
        """Refuse to act on a sandbox that is not running. After one full check, a
        :class:`RunningProof` answers in two system calls until the supervisor exits or the
        sandbox's record changes."""
        proof = self._running  # threads share the handle: a proof is closed only once unreferenced
        if proof is not None and proof.holds():
            return
        self._running = None
        if self._sb.status() is not MachineStatus.RUNNING:
            raise SandboxNotRunningError(f"sandbox {self.id} is {self._sb.meta()['status']}")
        self._running = RunningProof.take(self._sb)

    def _env_for(self, env: Mapping[str, str] | None) -> dict[str, str]:
        return {**self._env, **(env or {})}

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
        self._check_running()
        text = command_text(command)
        started = time.monotonic()
        argv = _argv(command)
        try:
            proc = subprocess.Popen(
                argv,
                cwd=self.resolve(cwd) if cwd else self.workdir,
                env=self._env_for(env),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except (FileNotFoundError, PermissionError) as exc:
            if exc.filename != argv[0]:
                raise
            # Answer as a shell would (127 not found, 126 not executable), like every provider.
            message = f"{argv[0]}: {exc.strerror}\n"
            if on_output is not None:
                on_output("stderr", message)
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            return ExecResult(text, code, "", message, time.monotonic() - started)
        pump = OutputPump(text, timeout=timeout, on_output=on_output)
        return pump.result(pump_popen(proc, pump, stdin))

    def start_process(
        self,
        command: Command,
        *,
        name: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ProcessInfo:
        self._check_running()
        if self.process_running(name):
            raise ValueError(f"a process named {name!r} is already running in sandbox {self.id}")
        log_path = Path(self.log_path(name))
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open_private(log_path) as log:
            proc = subprocess.Popen(
                _argv(command),
                cwd=self.resolve(cwd) if cwd else self.workdir,
                env=self._env_for(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._children[name] = proc
        self._sb.procs.mkdir(exist_ok=True)
        write_json(
            self._sb.procs / f"{name}.json",
            {
                "pid": proc.pid,
                "pgid": proc.pid,
                "started": procs.start_time(proc.pid),
                "command": command_text(command),
            },
        )
        return ProcessInfo(name, proc.pid, command_text(command), str(log_path))

    def _proc_record(self, name: str) -> dict[str, Any] | None:
        try:
            return read_json(self._sb.procs / f"{name}.json")
        except (OSError, ValueError):
            return None

    def process_running(self, name: str) -> bool:
        child = self._children.get(name)
        if child is not None:
            return child.poll() is None
        rec = self._proc_record(name)
        if not rec:
            return False
        return procs.alive(rec["pid"], rec.get("started"))

    def stop_process(self, name: str, *, grace: float = 5.0) -> None:
        rec = self._proc_record(name)
        if rec is None:
            return
        # The record is a file on disk: signal its group only if it is this sandbox's.
        groups = procs.sandbox_groups(self.id, self._sb.pgids([rec]))
        born = {pgid: procs.start_time(pgid) for pgid in groups}
        if self.process_running(name):
            for pgid in groups:
                procs.kill_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self.process_running(name) and time.monotonic() < deadline:
                time.sleep(0.05)
        procs.kill_groups(groups, born)  # not a number another process took meanwhile
        child = self._children.pop(name, None)
        if child is not None:
            child.wait()
        (self._sb.procs / f"{name}.json").unlink(missing_ok=True)

    def log_path(self, name: str) -> str:
        return str(self._sb.logs / f"{name}.log")

    def log_names(self) -> list[str]:
        # Local logs live outside the working directory and outlive the sandbox.
        return sorted(p.stem for p in self._sb.logs.glob("*.log"))

    def process_log(self, name: str, *, lines: int | None = None) -> str:
        # Logs live outside the working directory and are kept after teardown (``seer logs``),
        # so read them directly rather than through read_bytes, which needs a running sandbox.
        text = Path(self.log_path(name)).read_bytes().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:]) if lines else text

    # --- files ----------------------------------------------------------------------------
    def write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        self._check_running()
        target = Path(self.resolve(path))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if mode is not None:
            target.chmod(mode)

    def read_bytes(self, path: str) -> bytes:
        self._check_running()
        return Path(self.resolve(path)).read_bytes()

    def make_dirs(self, path: str) -> None:
        self._check_running()
        Path(self.resolve(path)).mkdir(parents=True, exist_ok=True)

    def put_dir(self, local_dir: str | Path, remote_dir: str) -> None:
        self._check_running()
        shutil.copytree(local_dir, self.resolve(remote_dir), dirs_exist_ok=True, symlinks=True)

    def get_dir(self, remote_dir: str, local_dir: str | Path) -> None:
        self._check_running()
        copy_tree_as_found(Path(self.resolve(remote_dir)), Path(local_dir))

    def existing_dirs(self, paths: list[str]) -> set[str]:
        # the sandbox's folder is on this disk: a stat each, no process
        self._check_running()
        return {p for p in paths if os.path.isdir(self.resolve(p))}

    def model_cache_dir(self) -> str:
        # The machine's own Hugging Face cache, shared by every local sandbox and the user.
        return hf_hub_cache(self._env)

    def tools_dir(self) -> str:
        # Shared by every local sandbox (and every SEER_HOME): code-server is installed once here.
        return str(local_tools_dir())

    # --- network and state ----------------------------------------------------------------
    def expose_port(self, port: int) -> str:
        return f"http://127.0.0.1:{port}"

    def snapshot(self, description: str = "") -> Snapshot:
        self._check_running()
        snap_id = f"snap-{secrets.token_hex(6)}"
        dest = seer_home() / "snapshots" / snap_id
        shutil.copytree(self.workdir, dest / "root", symlinks=True, ignore=shutil.ignore_patterns(".seer"))
        snap = Snapshot(
            "local", snap_id, description, time.time(), self.id, {"path": str(dest), "python": self.python}
        )
        write_json(dest / "snapshot.json", snap.to_dict())
        return snap

    def status(self) -> MachineStatus:
        return self._sb.status()

    def start_completed(self) -> None:
        # From now on the sandbox outlives its starter (until terminate() or its timeout).
        with self._sb.lock:
            self._sb.update(starter=None)


class LocalProvider(Provider):
    """Sandboxes as working directories plus processes on this machine."""

    name: ClassVar[str] = "local"
    id_pattern: ClassVar[str] = ID_PATTERN
    description: ClassVar[str] = "this machine: a working directory plus processes (built in)"
    capabilities: ClassVar[Capabilities] = Capabilities(
        gpu_types=frozenset(GPU_CATALOGUE),
        max_gpu_count=16,
        snapshots=True,
        volumes=False,
        port_exposure="loopback",
        max_lifetime=None,
        installs_system_packages=False,
        code_server=True,
    )
    options_model = LocalOptions

    @classmethod
    def check_config(cls, config: SandboxConfig) -> list[ConfigProblem]:
        problems = super().check_config(config)
        if not any(p.field.startswith("provider_options") for p in problems):
            # The packages the config names; create() checks them again with those its execution
            # mode and models add, before it makes anything.
            python = LocalOptions.model_validate(config.provider_options).python
            why = python_problem(list(config.python_packages), python)
            if why:
                field = "python_packages" if python == "auto" else "provider_options.python"
                problems.append(ConfigProblem(field, why))
        if config.gpu is not None and not any(p.field.startswith("gpu") for p in problems):
            found = detect_gpus()
            matching = [g for g in found if gpu_matches(config.gpu, g)]
            if not found:
                problems.append(
                    ConfigProblem(
                        "gpu",
                        f"gpu={config.gpu!r} asked for, but this machine has no NVIDIA GPU "
                        "(nvidia-smi finds none); use gpu=None or a cloud provider",
                    )
                )
            elif len(matching) < config.gpu_count:
                problems.append(
                    ConfigProblem(
                        "gpu",
                        f"gpu={config.gpu!r} x{config.gpu_count} asked for; this machine has "
                        f"{', '.join(found)}",
                    )
                )
        if config.debug:
            why = code_server_problem()
            if why:
                problems.append(ConfigProblem("debug", why))
        for i, pkg in enumerate(config.system_packages):
            if not _system_package_installed(pkg):
                problems.append(
                    ConfigProblem(
                        f"system_packages[{i}]",
                        f"{pkg!r} is not installed on this machine, and the local provider does not "
                        f"install system packages; install it (e.g. apt-get install {pkg.split('=')[0]})",
                    )
                )
        return problems

    # --- lifecycle ------------------------------------------------------------------------
    def create(self, spec: MachineSpec) -> Machine:
        python = python_choice(spec.options)
        why = python_problem(spec.python_packages, python)
        if why:  # before anything is made: nothing to clean up
            field = "python_packages" if python == "auto" else "provider_options.python"
            raise ConfigError([ConfigProblem(field, why)], title="The sandbox's Python cannot be provided")
        sandbox = SandboxDir(f"local-{secrets.token_hex(5)}")
        private_dir(local_root())
        private_dir(sandbox.dir, exist_ok=False)
        try:
            # Recorded and supervised before anything slow: a starter killed from here on leaves
            # a sandbox that `seer ls` shows and whose supervisor ends it (see .supervisor).
            supervisor = self._supervise(sandbox, spec)
            machine = self._create(sandbox, spec)
        except BaseException:
            self.terminate(sandbox.id)
            shutil.rmtree(sandbox.dir, ignore_errors=True)
            raise
        machine.keep_child("__supervisor__", supervisor)  # reaped when it ends, not leaked
        return machine

    def _supervise(self, sandbox: SandboxDir, spec: MachineSpec) -> subprocess.Popen[bytes]:
        """Write the sandbox's ``meta.json`` (naming this process as its starter) and secrets,
        and start its supervisor."""
        now = time.time()
        meta = {
            "id": sandbox.id,
            "name": spec.name,
            "status": MachineStatus.RUNNING.value,
            "created_at": now,
            "expires_at": now + spec.timeout,
            "timeout": spec.timeout,
            "python": None,
            "env": {},
            "labels": spec.labels,
            "gpu": spec.gpu,
            "gpu_count": spec.gpu_count,
            "supervisor": None,
            "starter": starter_info(),
        }
        write_json(sandbox.meta_path, meta)
        for d in (sandbox.root, sandbox.logs, sandbox.procs):
            private_dir(d)
        write_json(sandbox.secrets_path, spec.secrets)
        sup_env = {k: v for k, v in os.environ.items() if k != procs.MARKER}
        with open_private(sandbox.logs / "supervisor.log") as sup_log:
            proc = subprocess.Popen(
                [sys.executable, "-m", SUPERVISOR_MODULE, str(sandbox.dir)],
                stdin=subprocess.DEVNULL,
                stdout=sup_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=sup_env,
                close_fds=True,
            )
        sandbox.update(supervisor={"pid": proc.pid, "started": procs.start_time(proc.pid)})
        _await_command_line(proc, sandbox)
        return proc

    def _create(self, sandbox: SandboxDir, spec: MachineSpec) -> LocalMachine:
        def log(line: str) -> None:
            with open_private(sandbox.logs / "setup.log") as fh:
                fh.write(line.encode() + b"\n")
            spec.report(line)

        # The installer carries the sandbox's marker, so a teardown mid-build ends it too.
        build_env = {**os.environ, procs.MARKER: sandbox.id}
        configured = python_choice(spec.options)
        if configured not in ("auto", "system"):
            # Checked in create(); asked again for where its packages are.
            base = probe_interpreter(configured, requirement_names(spec.python_packages))
            log(
                "no environment to build: using the configured Python, which has all "
                f"{len(spec.python_packages)} packages the sandbox needs: {configured}"
            )
            python = make_sandbox_env(sandbox.venv, None, base)
            return self._finish_create(sandbox, spec, python)
        if not unsatisfied(spec.python_packages):
            offline = index_unreachable()
            # One line (progress shows one per interval), the path last where a cut loses least.
            log(
                "no environment to build: using this machine's Python, which has all "
                f"{len(spec.python_packages)} packages the sandbox needs"
                + (f" (offline: {offline})" if offline else "")
                + f": {sys.executable}"
            )
        layer = ensure_layer(spec.python_packages, seer_home() / "envs", log=log, env=build_env)
        python = make_sandbox_env(sandbox.venv, layer)
        return self._finish_create(sandbox, spec, python)

    def _finish_create(self, sandbox: SandboxDir, spec: MachineSpec, python: str) -> LocalMachine:
        if spec.snapshot is not None:
            src = Path(spec.snapshot.data["path"]) / "root"
            if not src.is_dir():
                raise SandboxNotFoundError(f"snapshot {spec.snapshot.id} has no stored files")
            shutil.copytree(src, sandbox.root, dirs_exist_ok=True, symlinks=True)
        sandbox.update(python=python, env=self._base_env(sandbox, spec, python))
        return self._machine(sandbox)

    @staticmethod
    def _base_env(sandbox: SandboxDir, spec: MachineSpec, python: str) -> dict[str, str]:
        env = {k: os.environ[k] for k in PASSTHROUGH if k in os.environ}
        bindir = str(Path(python).parent)
        env["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", "/usr/bin:/bin")])
        if Path(bindir).parent.joinpath("pyvenv.cfg").is_file():
            env["VIRTUAL_ENV"] = str(Path(bindir).parent)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(spec.env)
        env["SEER_WORKDIR"] = str(sandbox.root)
        env[procs.MARKER] = sandbox.id
        return env

    def _machine(self, sandbox: SandboxDir) -> LocalMachine:
        meta = sandbox.meta()
        secrets_values: dict[str, str] = {}
        with contextlib.suppress(OSError, ValueError):
            secrets_values = read_json(sandbox.secrets_path)
        return LocalMachine(sandbox, meta, {**meta["env"], **secrets_values})

    def attach(self, machine_id: str) -> Machine:
        sandbox = SandboxDir(machine_id)
        if not sandbox.exists():
            raise SandboxNotFoundError(f"no local sandbox {machine_id!r}")
        sandbox.status()  # reap it if it died unseen
        return self._machine(sandbox)

    def list(self) -> list[MachineInfo]:
        out: list[MachineInfo] = []
        root = local_root()
        if not root.is_dir():
            return out
        for entry in sorted(root.iterdir()):
            try:
                sandbox = SandboxDir(entry.name)
            except InvalidSandboxIdError:
                continue  # not a sandbox of ours: never touched
            if not sandbox.exists():
                _drop_remains(sandbox)
                continue
            try:
                status = sandbox.status()
                meta = sandbox.meta()
            except SandboxNotFoundError:
                continue
            if not status.alive and time.time() - meta.get("ended_at", time.time()) > RECORD_TTL:
                shutil.rmtree(sandbox.dir, ignore_errors=True)
                continue
            if status is MachineStatus.RUNNING and sandbox.starting(meta):
                status = MachineStatus.STARTING
            out.append(
                MachineInfo(
                    sandbox.id,
                    self.name,
                    meta["name"],
                    status,
                    meta["created_at"],
                    meta["expires_at"],
                    meta.get("labels", {}),
                )
            )
        return out

    def terminate(self, machine_id: str) -> None:
        sandbox = SandboxDir(machine_id)
        if not sandbox.exists():
            return
        meta = sandbox.meta()
        pid = sandbox.supervisor_pid(meta)
        if MachineStatus(meta["status"]) is MachineStatus.RUNNING and pid is not None:
            exited = _exit_waiter(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while sandbox.supervisor_alive(sandbox.meta()) and time.monotonic() < deadline:
                exited(min(0.02, max(0.0, deadline - time.monotonic())))
            if sandbox.supervisor_alive(sandbox.meta()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        # Whatever the supervisor managed, make sure: idempotent, and kills stragglers.
        sandbox.teardown(MachineStatus.TERMINATED)

    def delete_snapshot(self, snapshot: Snapshot) -> None:
        shutil.rmtree(Path(snapshot.data["path"]), ignore_errors=True)


def _exit_waiter(pid: int) -> Callable[[float], None]:
    """A wait of at most its argument's seconds that ends as soon as process ``pid`` exits (a
    pidfd where the kernel has them, else a plain sleep): teardown then learns of the
    supervisor's exit at once instead of at the next poll."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return time.sleep
    import select
    import weakref

    exited: list[bool] = []

    def wait(seconds: float) -> None:
        if exited:  # it has exited: what is left to wait for is its record, polled
            time.sleep(seconds)
        elif select.select([fd], [], [], seconds)[0]:
            exited.append(True)

    weakref.finalize(wait, os.close, fd)
    return wait


def _await_command_line(proc: subprocess.Popen[bytes], sandbox: SandboxDir, limit: float = 10.0) -> None:
    """Wait until the just-started supervisor's command line names it (or it has exited).

    ``Popen`` returns once the child's exec has closed its close-on-exec pipe, which the kernel
    does before it sets the new program's arguments: for a moment ``/proc/<pid>/cmdline`` is
    empty, and :meth:`SandboxDir.supervisor_pid` (which checks it, so that a planted pid is never
    signalled) would take the live supervisor for a dead one and reap the sandbox as ``lost``.
    A start that reaches its first status check within that moment must not see it."""
    deadline = time.monotonic() + limit
    while proc.poll() is None and time.monotonic() < deadline:
        if procs.runs(proc.pid, SUPERVISOR_MODULE, str(sandbox.dir)):
            return
        time.sleep(0.001)


def _drop_remains(sandbox: SandboxDir) -> None:
    """Remove a sandbox folder with no ``meta.json`` once it is older than a minute: a start
    killed between making the folder and recording it, with nothing started in it yet."""
    with contextlib.suppress(OSError):
        if not sandbox.dir.is_symlink() and time.time() - sandbox.dir.stat().st_mtime > 60:
            shutil.rmtree(sandbox.dir, ignore_errors=True)


def local_tools_dir() -> Path:
    """Where local sandboxes' tools (code-server, for ``debug``) are installed once:
    ``$SEER_TOOLS_DIR``, else ``$XDG_CACHE_HOME/seer/tools``, else ``~/.cache/seer/tools``. A cache,
    not state: every ``SEER_HOME`` (a test run's too) shares it."""
    raw = os.environ.get("SEER_TOOLS_DIR")
    if raw:
        return Path(raw).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "seer" / "tools"


def code_server_problem() -> str | None:
    """Why ``debug=True`` cannot be served here, or None: code-server is installed already, or it
    can be (a package index is reachable and the compilers its native modules need are here)."""
    from seer.providers import code_server

    tools = local_tools_dir()
    if code_server.installed(str(tools)):
        return None
    offline = index_unreachable()
    if offline:
        return (
            f"code-server {code_server.VERSION} is not installed in {tools} and no package index can be "
            f"reached ({offline}); install it once where one can (scripts/code-server) or set debug to false"
        )
    why = code_server.build_problem()
    if why:
        return (
            f"code-server {code_server.VERSION} is not installed in {tools}, and {why}; "
            "install them or set debug to false"
        )
    return None


def sandbox_dir(sandbox_id: str) -> Path:
    """Where a local sandbox keeps its state (for ``seer logs`` and tests)."""
    return SandboxDir(sandbox_id).dir


__all__ = [
    "LocalMachine",
    "LocalOptions",
    "LocalProvider",
    "code_server_problem",
    "detect_gpus",
    "local_tools_dir",
    "sandbox_dir",
]

"""A throwaway third-party seer provider, ``toy``: proof that the provider contract is enough.

Written apart from seer's ``local`` provider and against nothing but the public contract
(:mod:`seer.providers.base`). A toy sandbox is a directory plus processes on this machine::

    $SEER_HOME/toy/<id>/state.json    id, name, status, deadline, env, watchdog
    $SEER_HOME/toy/<id>/secrets.json  secret values (0600), removed at teardown
    $SEER_HOME/toy/<id>/pgids         every process group the sandbox started
    $SEER_HOME/toy/<id>/root/         the working directory

Files travel through ``exec`` (write over stdin; directories use the base class's tar-over-exec
defaults), as they would on a remote machine. A detached watchdog tears the sandbox down when its
timeout passes; every process it started carries ``SEER_TOY_SANDBOX=<id>`` so teardown finds it.
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import seer
from seer.errors import ConfigProblem, ExecTimeoutError, SandboxNotFoundError, SandboxNotRunningError
from seer.ids import check_sandbox_id
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
    command_text,
)
from seer.state import seer_home

MARK = "SEER_TOY_SANDBOX"
_ID = re.compile(r"^toy-[0-9a-f]{12}$")
_WATCHDOG = "import sys, seer_toy_provider as toy; toy._watch(sys.argv[1])"
_handles: dict[str, subprocess.Popen[bytes]] = {}  # children of this client, reaped when ended


def _proc_stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (state, ppid, pgrp, ...), or None if it is gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _running(pid: int | None, started: str | None) -> bool:
    stat = _proc_stat(pid) if pid else None
    return bool(stat) and stat[0] not in ("Z", "X") and stat[19] == started  # type: ignore[index]


class _Box:
    """One toy sandbox's state on disk."""

    def __init__(self, box_dir: Path):
        self.dir = box_dir
        self.id = box_dir.name
        self.root = box_dir / "root"

    def load(self) -> dict[str, Any]:
        try:
            return json.loads((self.dir / "state.json").read_text())
        except (OSError, ValueError):
            raise SandboxNotFoundError(f"no toy sandbox {self.id!r}") from None

    def save(self, state: dict[str, Any]) -> None:
        tmp = self.dir / f".state.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.dir / "state.json")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with open(self.dir / ".lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            yield

    def add_group(self, pgid: int) -> None:
        with open(self.dir / "pgids", "a") as fh:
            fh.write(f"{pgid}\n")

    def status(self) -> MachineStatus:
        """The status now; a sandbox past its deadline, or whose watchdog died, is torn down."""
        state = self.load()
        if state["status"] == MachineStatus.RUNNING.value:
            if time.time() >= state["expires_at"]:
                self.teardown(MachineStatus.EXPIRED)
            elif not _running(*state["watchdog"]):
                self.teardown(MachineStatus.LOST)
            state = self.load()
        return MachineStatus(state["status"])

    def teardown(self, status: MachineStatus) -> None:
        with self.locked():
            self._kill_all()
            state = self.load()
            if state["status"] != MachineStatus.RUNNING.value:
                return
            shutil.rmtree(self.root, ignore_errors=True)
            (self.dir / "secrets.json").unlink(missing_ok=True)
            self.save({**state, "status": status.value, "ended_at": time.time()})

    def _kill_all(self) -> None:
        """SIGKILL every process in the sandbox's groups that carries its mark."""
        try:
            groups = {int(line) for line in (self.dir / "pgids").read_text().split()}
        except OSError:
            return
        mark = f"{MARK}={self.id}".encode()
        for _ in range(20):
            victims = []
            for entry in Path("/proc").iterdir():
                stat = _proc_stat(int(entry.name)) if entry.name.isdigit() else None
                if not stat or int(stat[2]) not in groups:
                    continue
                with contextlib.suppress(OSError):
                    if mark in (entry / "environ").read_bytes().split(b"\0"):
                        victims.append(int(entry.name))
            if not victims:
                return
            for pid in victims:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)


def _watch(box_dir: str) -> None:
    """The watchdog's body: wait for the deadline, then tear the sandbox down."""
    box = _Box(Path(box_dir))
    while True:
        try:
            state = box.load()
        except SandboxNotFoundError:
            return
        if state["status"] != MachineStatus.RUNNING.value:
            return
        left = state["expires_at"] - time.time()
        if left <= 0:
            box.teardown(MachineStatus.EXPIRED)
            return
        time.sleep(min(left, 0.5))


class ToyMachine(Machine):
    def __init__(self, box: _Box):
        state = box.load()
        self._box = box
        self.id = box.id
        self.workdir = str(box.root)
        self.python = state["python"]
        self._env = state["env"]

    def _check(self) -> None:
        status = self._box.status()
        if status is not MachineStatus.RUNNING:
            raise SandboxNotRunningError(f"toy sandbox {self.id} is {status.value}")

    def _popen(self, command: Command, env: Mapping[str, str] | None, cwd: str | None, **kw: Any) -> Any:
        secrets = json.loads((self._box.dir / "secrets.json").read_text())
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        proc = subprocess.Popen(
            argv,
            cwd=self.resolve(cwd or "."),
            env={**self._env, **secrets, **(env or {})},
            start_new_session=True,
            **kw,
        )
        self._box.add_group(proc.pid)
        return proc

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
        self._check()
        text, started = command_text(command), time.monotonic()
        try:
            proc = self._popen(
                command,
                env,
                cwd,
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except FileNotFoundError as exc:
            if isinstance(command, str) or exc.filename != command[0]:
                raise
            return ExecResult(text, 127, "", f"toy: {command[0]}: command not found\n")
        got = {"stdout": bytearray(), "stderr": bytearray()}
        decoders = {name: codecs.getincrementaldecoder("utf-8")("replace") for name in got}
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
        pending = memoryview(stdin or b"")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin, selectors.EVENT_WRITE, "stdin")
        deadline = None if timeout is None else started + timeout
        exited_at = None
        try:
            while sel.get_map():
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    out, err = (bytes(got[n]).decode(errors="replace") for n in ("stdout", "stderr"))
                    raise ExecTimeoutError(text, timeout or 0, out, err)
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > 1.0:
                    break  # a background grandchild holds the pipes: stop waiting for it
                for key, _ in sel.select(0.1):
                    if key.data == "stdin":
                        with contextlib.suppress(BlockingIOError):
                            try:
                                pending = pending[os.write(key.fd, pending[:65536]) :]
                            except BrokenPipeError:
                                pending = pending[:0]
                        if not pending:
                            sel.unregister(key.fileobj)
                            proc.stdin.close()
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    got[key.data] += chunk
                    piece = decoders[key.data].decode(chunk)
                    if piece and on_output is not None:
                        on_output(key.data, piece)
            code = proc.wait()
        except BaseException:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            sel.close()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        if on_output is not None:
            for name, decoder in decoders.items():
                if tail := decoder.decode(b"", final=True):
                    on_output(name, tail)
        out, err = (bytes(got[n]).decode(errors="replace") for n in ("stdout", "stderr"))
        return ExecResult(text, code, out, err, time.monotonic() - started)

    def _proc_path(self, name: str) -> Path:
        return self._box.dir / "procs" / f"{name}.json"

    def start_process(
        self, command: Command, *, name: str, env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> ProcessInfo:
        self._check()
        if self.process_running(name):
            raise ValueError(f"toy sandbox {self.id} already runs a process named {name!r}")
        log = Path(self.log_path(name))
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as fh:
            proc = self._popen(
                command, env, cwd, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT
            )
        _handles[f"{self.id}/{name}"] = proc
        stat = _proc_stat(proc.pid)
        self._proc_path(name).parent.mkdir(exist_ok=True)
        self._proc_path(name).write_text(json.dumps([proc.pid, stat[19] if stat else None]))
        return ProcessInfo(name, proc.pid, command_text(command), str(log))

    def process_running(self, name: str) -> bool:
        handle = _handles.get(f"{self.id}/{name}")
        if handle is not None and handle.poll() is not None:
            _handles.pop(f"{self.id}/{name}")
        try:
            return _running(*json.loads(self._proc_path(name).read_text()))
        except (OSError, ValueError):
            return False

    def stop_process(self, name: str, *, grace: float = 5.0) -> None:
        try:
            pid, _ = json.loads(self._proc_path(name).read_text())
        except (OSError, ValueError):
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 0.0)):
            with contextlib.suppress(OSError):
                os.killpg(pid, sig)
            end = time.monotonic() + wait
            while self.process_running(name) and time.monotonic() < end:
                time.sleep(0.05)
        handle = _handles.pop(f"{self.id}/{name}", None)
        if handle is not None:
            handle.wait()
        self._proc_path(name).unlink(missing_ok=True)

    def write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        script = 'mkdir -p "$(dirname "$1")" && cat > "$1" && if [ -n "$2" ]; then chmod "$2" "$1"; fi'
        octal = "" if mode is None else format(mode, "o")
        self.exec(["bash", "-c", script, "write", self.resolve(path), octal], stdin=data).check()

    def read_bytes(self, path: str) -> bytes:
        self._check()
        return Path(self.resolve(path)).read_bytes()

    def expose_port(self, port: int) -> str:
        self._check()
        return f"http://127.0.0.1:{port}"

    def status(self) -> MachineStatus:
        return self._box.status()


class ToyProvider(Provider):
    """Sandboxes as directories plus processes, written against the public contract only."""

    name: ClassVar[str] = "toy"
    id_pattern: ClassVar[str] = _ID.pattern.strip("^$")
    description: ClassVar[str] = "a throwaway test provider: directories plus processes"
    capabilities: ClassVar[Capabilities] = Capabilities(port_exposure="loopback", max_lifetime=6 * 3600)

    @classmethod
    def check_config(cls, config: seer.SandboxConfig) -> list[ConfigProblem]:
        problems = super().check_config(config)
        for field in ("python_packages", "system_packages"):
            if getattr(config, field):
                problems.append(ConfigProblem(field, "the toy provider installs no packages"))
        return problems

    def _box(self, machine_id: str) -> _Box:
        box = _Box(seer_home() / "toy" / machine_id)
        if not _ID.match(machine_id) or not (box.dir / "state.json").is_file():
            raise SandboxNotFoundError(f"no toy sandbox {machine_id!r}")
        return box

    def create(self, spec: MachineSpec) -> Machine:
        box = _Box(seer_home() / "toy" / f"toy-{uuid.uuid4().hex[:12]}")
        box.root.mkdir(parents=True)
        try:
            bindir = os.path.dirname(sys.executable)
            env = {k: os.environ[k] for k in ("HOME", "LANG", "TMPDIR", "SEER_HOME") if k in os.environ}
            env.update(PATH=f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}", **spec.env)
            env[MARK] = box.id
            now = time.time()
            state = {
                "id": box.id,
                "name": spec.name,
                "labels": spec.labels,
                "status": MachineStatus.RUNNING.value,
                "created_at": now,
                "expires_at": now + spec.timeout,
                "python": sys.executable,
                "env": env,
                "watchdog": [None, None],
            }
            fd = os.open(box.dir / "secrets.json", os.O_WRONLY | os.O_CREAT, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump(spec.secrets, fh)
            box.save(state)
            dog = subprocess.Popen(
                [sys.executable, "-c", _WATCHDOG, str(box.dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                env={k: v for k, v in os.environ.items() if k != MARK},
            )
            _handles[box.id] = dog
            stat = _proc_stat(dog.pid)
            box.save({**state, "watchdog": [dog.pid, stat[19] if stat else None]})
            return ToyMachine(box)
        except BaseException:
            self.terminate(box.id)
            shutil.rmtree(box.dir, ignore_errors=True)
            raise

    def attach(self, machine_id: str) -> Machine:
        box = self._box(machine_id)
        box.status()
        return ToyMachine(box)

    def list(self) -> list[MachineInfo]:
        found = []
        for state_file in sorted((seer_home() / "toy").glob("toy-*/state.json")):
            box = _Box(state_file.parent)
            with contextlib.suppress(SandboxNotFoundError):
                status, state = box.status(), box.load()
                found.append(
                    MachineInfo(
                        box.id,
                        self.name,
                        state["name"],
                        status,
                        state["created_at"],
                        state["expires_at"],
                        state["labels"],
                    )
                )
        return found

    def terminate(self, machine_id: str) -> None:
        check_sandbox_id(machine_id, ToyProvider)  # a malformed id is an error, an unknown one not
        try:
            box = self._box(machine_id)
        except SandboxNotFoundError:
            return
        pid, started = box.load()["watchdog"]
        if _running(pid, started):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        handle = _handles.pop(machine_id, None)
        if handle is not None:
            handle.wait()
        box.teardown(MachineStatus.TERMINATED)


@seer.hookimpl
def seer_register_providers(register: Any) -> None:
    register(ToyProvider)

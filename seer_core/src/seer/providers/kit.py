"""The provider kit: what every provider that talks to its machine over exec would otherwise write.

A provider is glue between its SDK and seer's contract (:mod:`seer.providers.base`). Most of what
a machine must do (background processes that outlive the client, logs, killing a timed-out
command's whole tree, moving files and directories, knowing whether a sandbox that is gone
ended, expired or was lost) can be written once on top of two things the SDK gives: *run a
command* and *move bytes*. This module holds those generic pieces:

* :class:`OutputPump`: collects a command's output from however it arrives (pipes, a socket, an
  SDK's iterators), streams it to ``on_output``, and enforces the deadline: past it, the command
  is killed and :class:`~seer.errors.ExecTimeoutError` carries the output so far. A background
  child that keeps the streams open does not hold a finished command up. :func:`pump_popen` runs
  it over a local :class:`subprocess.Popen`.
* :class:`ExecMachine`: a :class:`~seer.providers.base.Machine` whose subclass supplies only
  :meth:`ExecMachine.run` (argv, env, cwd, stdin → exit code, output into a pump), ``status`` and
  ``expose_port``. It gets ``exec`` (strings through ``bash -c``, argv through ``env`` so a missing
  program answers 127, every process of a command marked so a timeout kills its whole tree),
  background processes done with shell in the machine (``setsid``, a pid + start-time record,
  process-group kill only of a group whose leader is verified), files and directories as tar
  streams (:meth:`ExecMachine.put_tar` / :meth:`ExecMachine.get_tar`: over exec by default, or the
  SDK's own archive calls), a lifetime watchdog for platforms without one, and the ledger hook.
* :class:`Ledger`: the client-side record of a provider's sandboxes, under
  ``$SEER_HOME/<provider>/sandboxes/``, private (0600 in a 0700 folder) and expiring
  :data:`~seer.state.RECORD_TTL` after a sandbox ended. It tells ``terminated`` from ``expired``
  and ``lost`` once a machine is gone, reports ``starting`` while the starting client lives, and
  starts the *starter watch*: a small process on the client's host that ends a half-made sandbox
  at once if its starting client dies before ``Sandbox.start`` finished.
* :func:`detect_gpus` / :func:`gpu_matches`: the NVIDIA GPUs of the host a provider's machines run
  on (the local machine, a local Docker engine).

The toy provider in seer's tests (``tests/plugins/seer-toy-provider``) is a complete provider
built on this kit in under 150 lines; docs/providers.md walks through it.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import importlib
import io
import os
import posixpath
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seer.errors import ExecTimeoutError, SandboxError, SandboxNotFoundError, SandboxNotRunningError
from seer.ids import check_sandbox_id
from seer.providers.base import (
    Command,
    ExecResult,
    Machine,
    MachineInfo,
    MachineStatus,
    OutputCallback,
    ProcessInfo,
    command_text,
)
from seer.providers.starter import starter_alive, starter_info
from seer.state import RECORD_TTL, private_dir, read_json, seer_home, write_json

if TYPE_CHECKING:
    from seer.providers.base import Provider

__all__ = [
    "EXEC_MARK",
    "EXPIRY_SLACK",
    "KILL_MARKED",
    "ExecMachine",
    "Ledger",
    "OutputPump",
    "detect_gpus",
    "gpu_matches",
    "kill_marked_argv",
    "pump_popen",
    "watch_starter_main",
]

#: The variable marking every process of one exec (value: a random token), so a timeout kills
#: the command's whole tree, even what left its process group.
EXEC_MARK = "SEER_EXEC_ID"
#: Slack when deciding whether a machine that vanished had reached its deadline.
EXPIRY_SLACK = 5.0


# --- GPUs ------------------------------------------------------------------------------------
def detect_gpus() -> list[str]:
    """Names of the NVIDIA GPUs on this host (empty without a driver)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def gpu_matches(wanted: str, found: str) -> bool:
    """Whether the GPU named ``found`` (as ``nvidia-smi`` names it) is a ``wanted`` one from the
    catalogue (``A100``, ``A100-80GB``...)."""
    family, _, memory = wanted.partition("-")
    found = found.upper().replace(" ", "")
    return family.upper() in found and (not memory or memory.upper().replace("GB", "") in found)


# --- the output pump -------------------------------------------------------------------------
class OutputPump:
    """One command's output, collected as it arrives, and its deadline.

    A provider hands it the command's streams with :meth:`read_stream` (each read on a thread of
    its own, so a blocking SDK call is fine), optionally its stdin with :meth:`send`, then calls
    :meth:`wait`. The raw bytes are kept (:meth:`data`, for files read over exec); the text is
    decoded as UTF-8 with replacement, and ``on_output`` sees it piece by piece, in order, from
    the reader threads. An exception raised by ``on_output`` ends the command and is re-raised
    by :meth:`wait`.
    """

    def __init__(
        self,
        command: str,
        *,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        kill: Callable[[], None] | None = None,
    ):
        self.command = command
        self.timeout = timeout
        self.started = time.monotonic()
        #: monotonic time past which the command is killed (None: no deadline)
        self.deadline = None if timeout is None else self.started + timeout
        #: kills the command's processes on a timeout (set by :class:`ExecMachine`)
        self.kill = kill
        self.closed = threading.Event()
        self._on_output = on_output
        self._raw = {"stdout": bytearray(), "stderr": bytearray()}
        self._decoders = {name: codecs.getincrementaldecoder("utf-8")(errors="replace") for name in self._raw}
        self._lock = threading.Lock()
        self._readers = 0
        self._all_read = threading.Event()
        self._all_read.set()
        self._error: BaseException | None = None
        self._inline: tuple[Any, Any, Any] | None = None
        self._last_output = self.started

    # --- feeding --------------------------------------------------------------------------
    def feed(self, stream: str, data: bytes) -> None:
        """Add ``data`` that ``stream`` (``stdout`` or ``stderr``) produced."""
        if not data:
            return
        with self._lock:
            self._raw[stream] += data
            self._last_output = time.monotonic()
            if self._on_output is not None:
                piece = self._decoders[stream].decode(data)
                if piece:
                    self._on_output(stream, piece)

    def read_stream(
        self,
        read: Callable[[], bytes | None],
        stream: str | Callable[[bytes], None],
        *,
        close: Callable[[], None] | None = None,
        inline: bool = False,
    ) -> None:
        """Read a stream on a thread until it ends: ``read()`` returns bytes, ``b""`` at its end,
        or None when nothing came yet (a read with a timeout: it is called again until
        :meth:`wait` is over). The data goes to ``stream`` (a name, or a function that splits a
        multiplexed stream and calls :meth:`feed`); ``close`` runs at the end.

        With ``inline``, :meth:`wait` reads the stream itself, on the calling thread, so no
        thread hands output over per command (what a single multiplexed stream wants); then
        ``read()`` must return None after at most a fraction of a second. One per pump."""
        reader = (read, stream, close)
        with self._lock:
            self._readers += 1
            self._all_read.clear()
        if inline:
            self._inline = reader
            return

        def loop() -> None:
            while not self.closed.is_set() and self._read_once(reader):
                pass
            self._reader_done(reader)

        threading.Thread(target=loop, name="seer-output-pump", daemon=True).start()

    def _read_once(self, reader: tuple[Any, Any, Any]) -> bool:
        """One read of a stream into the pump; False once the stream ended or broke (what came
        is what there is), or ``on_output`` raised (kept for :meth:`wait` to raise)."""
        read, stream, _close = reader
        try:
            data = read()
            if data is None:
                return True
            if not data:
                return False
            if isinstance(stream, str):
                self.feed(stream, data)
            else:
                stream(data)
            return True
        except OSError:
            return False
        except BaseException as exc:
            self._error = self._error or exc
            return False

    def _reader_done(self, reader: tuple[Any, Any, Any]) -> None:
        if reader is self._inline:
            self._inline = None
        if reader[2] is not None:
            with contextlib.suppress(OSError):
                reader[2]()
        with self._lock:
            self._readers -= 1
            if not self._readers:
                self._all_read.set()

    def _read_inline(self) -> None:
        if self._inline is not None and not self._read_once(self._inline):
            self._reader_done(self._inline)

    @staticmethod
    def send(data: bytes, write: Callable[[bytes], Any], close: Callable[[], Any]) -> None:
        """Write ``data`` to the command's stdin on a thread, then close it (a command that stops
        reading early is no error)."""

        def feed() -> None:
            with contextlib.suppress(OSError):
                write(data)
            with contextlib.suppress(OSError):
                close()

        threading.Thread(target=feed, name="seer-stdin", daemon=True).start()

    # --- waiting --------------------------------------------------------------------------
    def remaining(self) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def wait(
        self,
        exited: Callable[[float], bool],
        *,
        kill: Callable[[], None] | None = None,
        linger: float = 1.0,
        poll: float = 0.5,
        drain: float = 2.0,
    ) -> None:
        """Wait for the command to end: its streams ended and ``exited(seconds)`` (which may wait
        up to that long) says it exited; or it exited and its streams stayed quiet for ``linger``
        seconds (a background child holds them; ``exited(0)`` is asked at most every ``poll``
        seconds then). At the deadline, or on any exception, ``kill`` and :attr:`kill` end the
        command; after a deadline the output that still comes within ``drain`` seconds is kept
        and :class:`~seer.errors.ExecTimeoutError` raised."""
        try:
            finished = self._wait(exited, linger, poll)
        except BaseException:
            self._kill(kill)
            self._close()
            raise
        if not finished:
            self._kill(kill)
            end = time.monotonic() + drain
            while self._inline is not None and time.monotonic() < end:
                self._read_inline()
            self._all_read.wait(max(0.0, end - time.monotonic()))
        self._close()
        if not finished:
            raise ExecTimeoutError(self.command, self.timeout or 0, self.text("stdout"), self.text("stderr"))

    def _wait(self, exited: Callable[[float], bool], linger: float, poll: float) -> bool:
        """True once the command ended, False at the deadline."""
        last_poll = 0.0
        while True:
            if self._error is not None:
                raise self._error
            left = self.remaining()
            if left is not None and left <= 0:
                return False
            step = 0.1 if left is None else min(0.1, left)
            if self._all_read.is_set():
                if exited(step):
                    return True
                continue
            if self._inline is not None:
                self._read_inline()
            elif self._all_read.wait(step):
                continue
            now = time.monotonic()
            if now - self._last_output >= linger and now - last_poll >= poll:
                last_poll = now
                if exited(0):
                    return True

    def _close(self) -> None:
        """Stop the readers: threads at their next read, an inline stream now."""
        self.closed.set()
        if self._inline is not None:
            self._reader_done(self._inline)

    def _kill(self, kill: Callable[[], None] | None) -> None:
        for fn in (kill, self.kill):
            if fn is not None:
                with contextlib.suppress(Exception):
                    fn()

    # --- results --------------------------------------------------------------------------
    def data(self, stream: str) -> bytes:
        """The raw bytes ``stream`` produced so far."""
        with self._lock:
            return bytes(self._raw[stream])

    def text(self, stream: str) -> str:
        """What ``stream`` produced so far, decoded."""
        return self.data(stream).decode("utf-8", errors="replace")

    def result(self, exit_code: int) -> ExecResult:
        """The finished command's :class:`~seer.providers.base.ExecResult`."""
        if self._on_output is not None:
            for name, decoder in self._decoders.items():
                tail = decoder.decode(b"", final=True)
                if tail:
                    self._on_output(name, tail)
        return ExecResult(
            self.command, exit_code, self.text("stdout"), self.text("stderr"), time.monotonic() - self.started
        )


def pump_popen(proc: subprocess.Popen[bytes], pump: OutputPump, stdin: bytes | None = None) -> int:
    """Pump a local process started with ``stdout`` and ``stderr`` pipes (and a stdin pipe if
    ``stdin`` is given) in a session of its own (``start_new_session=True``); return its exit
    code. At the deadline its process group is killed."""

    def pipe(stream: Any) -> Callable[[], bytes]:
        fd = stream.fileno()
        return lambda: os.read(fd, 65536)

    pump.read_stream(pipe(proc.stdout), "stdout", close=proc.stdout.close)  # type: ignore[union-attr]
    pump.read_stream(pipe(proc.stderr), "stderr", close=proc.stderr.close)  # type: ignore[union-attr]
    if stdin is not None and proc.stdin is not None:
        pump.send(stdin, proc.stdin.write, proc.stdin.close)

    def exited(seconds: float) -> bool:
        try:
            proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    try:
        pump.wait(exited, kill=kill)
    finally:
        if proc.returncode is None:
            kill()
            proc.wait()
    return proc.returncode


# --- shell run in the machine ----------------------------------------------------------------
#: ``bash -c KILL_MARKED seer VARIABLE VALUE``: KILL every process whose environment holds
#: VARIABLE=VALUE (the whole tree of a timed-out exec, even what left its process group), but
#: itself, so it can run marked too.
KILL_MARKED = r"""
for f in $(grep -lzx -- "$1=$2" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}; p=${p%/environ}
    [ "$p" = "$$" ] || kill -KILL "$p" 2>/dev/null
done
true
"""


def kill_marked_argv(variable: str, value: str) -> list[str]:
    """The argv that kills every process in a machine whose environment holds variable=value."""
    return ["bash", "-c", KILL_MARKED, "seer", variable, value]


_PROC_FUNCS = r"""
starttime() {
    local s
    { read -r s < "/proc/$1/stat"; } 2>/dev/null || return 1
    s=${s##*) }
    set -- $s
    [ "$1" != Z ] && [ "$1" != X ] || return 1
    echo "${20}"
}
alive() {
    local pid st now
    [ -f "$1" ] || return 1
    read -r pid st < "$1" || return 1
    now=$(starttime "$pid") || return 1
    [ "$now" = "$st" ]
}
"""

#: ``seer <procs dir> <name> <log> argv...``: start argv in a session of its own (so it leads a
#: process group), its output appended to the log, and record ``<pid> <start time>`` (field 22 of
#: ``/proc/<pid>/stat``, which tells it from a later process reusing its pid); print its pid.
#: Exit 17: the name is taken by a running process.
_START = (
    _PROC_FUNCS
    + r"""
rec="$1/$2.pid"; log="$3"; procs="$1"; shift 3
if alive "$rec"; then echo "a process named this is already running" >&2; exit 17; fi
(umask 077; mkdir -p "$(dirname "$log")" "$procs" && : >> "$log") || exit 1
setsid "$@" >>"$log" 2>&1 </dev/null &
pid=$!
echo "$pid $(starttime "$pid")" > "$rec"
echo "$pid"
"""
)
#: ``seer <procs dir> <name>``: exit 0 if the process runs.
_RUNNING = _PROC_FUNCS + '\nalive "$1/$2.pid"\n'
#: ``seer <procs dir> <name> <grace seconds>``: TERM the process's group, KILL it after the
#: grace; forget it. The group is signalled only while its leader is the recorded process.
_STOP = (
    _PROC_FUNCS
    + r"""
rec="$1/$2.pid"; grace="$3"
[ -f "$rec" ] || exit 0
read -r pid st < "$rec"
if alive "$rec"; then
    kill -TERM -- "-$pid" 2>/dev/null
    end=$((SECONDS + ${grace%.*} + 1))
    while alive "$rec" && [ "$SECONDS" -lt "$end" ]; do sleep 0.05; done
    kill -KILL -- "-$pid" 2>/dev/null
fi
rm -f "$rec"
"""
)


# --- the machine -----------------------------------------------------------------------------
class ExecMachine(Machine):
    """A machine reached by running commands in it. Subclasses write :meth:`run`, ``status`` and
    ``expose_port``, set ``id``, ``workdir`` and ``python``, and override :meth:`put_tar` /
    :meth:`get_tar` (or ``write_bytes`` / ``read_bytes``) where their SDK moves files itself.

    Every command of :meth:`exec` carries :data:`EXEC_MARK` with a token of its own, so at its
    timeout every process of its tree is killed (:data:`KILL_MARKED`). Background processes are
    recorded in :attr:`procs_dir` in the machine; set it to a folder no snapshot keeps (a tmpfs)
    where there is one.
    """

    #: the provider's ledger, if it keeps one (:meth:`start_completed` clears the starter in it)
    ledger: Ledger | None = None

    @property
    def procs_dir(self) -> str:
        """Where background processes' records live in the machine."""
        return posixpath.join(self.workdir, ".seer", "procs")

    # --- what a subclass writes -----------------------------------------------------------
    @abstractmethod
    def run(
        self, argv: list[str], *, env: Mapping[str, str], cwd: str, stdin: bytes | None, pump: OutputPump
    ) -> int:
        """Run ``argv`` in the machine with ``env`` added to its environment, in ``cwd``, fed
        ``stdin`` (None: none, end-of-file at once); hand its output to ``pump`` and return its
        exit code once ``pump.wait`` returns. Raise :class:`~seer.errors.SandboxNotRunningError`
        (see :meth:`not_running`) when the machine is gone."""

    def command_env(self) -> dict[str, str]:
        """Variables every command gets besides the machine's own (the secrets, say)."""
        return {}

    def not_running(self) -> SandboxNotRunningError:
        """The error for an operation on a machine that is gone, naming its status."""
        return SandboxNotRunningError(f"sandbox {self.id} is {self.status().value}")

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
        code, pump = self.run_pumped(
            argv,
            text=command_text(command),
            env={**self.command_env(), **(env or {})},
            cwd=cwd,
            stdin=stdin,
            timeout=timeout,
            on_output=on_output,
        )
        return pump.result(code)

    def run_pumped(
        self,
        argv: list[str],
        *,
        text: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
    ) -> tuple[int, OutputPump]:
        """Run ``argv`` as it is (no ``bash -c``, no ``command_env``), marked for killing at its
        timeout; return the exit code and the pump holding its output."""
        token = secrets.token_hex(8)
        pump = OutputPump(
            text or command_text(argv),
            timeout=timeout,
            on_output=on_output,
            kill=lambda: self._kill_marked(token),
        )
        code = self.run(
            argv,
            env={**(env or {}), EXEC_MARK: token},
            cwd=self.resolve(cwd) if cwd else self.workdir,
            stdin=stdin,
            pump=pump,
        )
        return code, pump

    def _kill_marked(self, token: str) -> None:
        self.run(kill_marked_argv(EXEC_MARK, token), env={}, cwd="/", stdin=None, pump=OutputPump("kill"))

    def _shell(
        self, snippet: str, *args: str, env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> ExecResult:
        code, pump = self.run_pumped(["bash", "-c", snippet, "seer", *args], env=env, cwd=cwd)
        return pump.result(code)

    # --- background processes -------------------------------------------------------------
    def start_process(
        self, command: Command, *, name: str, env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> ProcessInfo:
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        log = self.log_path(name)
        result = self._shell(
            _START, self.procs_dir, name, log, *argv, env={**self.command_env(), **(env or {})}, cwd=cwd
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
            return self._shell(_RUNNING, self.procs_dir, name).ok
        except SandboxNotRunningError:
            return False

    def stop_process(self, name: str, *, grace: float = 5.0) -> None:
        with contextlib.suppress(SandboxNotRunningError):
            self._shell(_STOP, self.procs_dir, name, f"{grace:g}")

    def start_watchdog(self, seconds: float, end: list[str]) -> ProcessInfo:
        """For a platform with no lifetime limit of its own: a background process (``watchdog``)
        that runs ``end`` (an argv that ends the machine) after ``seconds``."""
        return self.start_process(
            ["bash", "-c", 'sleep "$0"; exec "$@"', f"{max(seconds, 0):.0f}", *end], name="watchdog"
        )

    # --- files: tar streams ---------------------------------------------------------------
    def put_tar(self, data: bytes) -> None:
        """Unpack a tar stream at ``/`` in the machine, keeping its modes (default: over exec)."""
        code, pump = self.run_pumped(["tar", "-xpf", "-", "--no-same-owner", "-C", "/"], stdin=data)
        if code != 0:
            raise SandboxError(f"could not write into sandbox {self.id}: {pump.text('stderr').strip()}")

    def get_tar(self, path: str) -> bytes:
        """A tar stream of ``path`` (absolute), its entries under the folder ``basename(path)``
        (default: over exec). Raises FileNotFoundError if it is not there."""
        parent, base = posixpath.split(path.rstrip("/") or "/")
        code, pump = self.run_pumped(["tar", "-cf", "-", "-C", parent or "/", "--", base or "."])
        if code not in (0, 1):  # 1: a file changed while read, which is still an archive
            err = pump.text("stderr")
            if "No such file" in err or "Not a directory" in err:
                raise FileNotFoundError(f"{path} (in sandbox {self.id})")
            raise SandboxError(f"could not read from sandbox {self.id}: {err.strip()}")
        return pump.data("stdout")

    def write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(self.resolve(path).lstrip("/"))
            info.size = len(data)
            info.mode = 0o644 if mode is None else mode
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
        self.put_tar(buf.getvalue())

    def read_bytes(self, path: str) -> bytes:
        target = self.resolve(path)
        with tarfile.open(fileobj=io.BytesIO(self.get_tar(target))) as tar:
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
        self.put_tar(buf.getvalue())

    def get_dir(self, remote_dir: str, local_dir: str | Path) -> None:
        data = self.get_tar(self.resolve(remote_dir).rstrip("/") + "/.")
        dest = Path(local_dir)
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            members = []
            for member in tar.getmembers():
                # the archive's entries sit under a top folder named after remote_dir
                _top, _, rest = member.name.partition("/")
                if rest:
                    member.name = rest
                    members.append(member)
            tar.extractall(dest, members=members, filter="data")

    def start_completed(self) -> None:
        if self.ledger is not None:
            self.ledger.started(self.id)


# --- the ledger ------------------------------------------------------------------------------
class Ledger:
    """The client's records of one provider's sandboxes: ``$SEER_HOME/<name>/sandboxes/<id>.json``.

    A record holds what :meth:`begin` was given (name, labels, deadline, anything else the
    provider wants back: a workdir, an address), its ``status`` and, until ``start()`` finishes,
    the ``starter`` client. Records are private (0600 in a 0700 folder); ids read back from the
    disk are checked against the provider's :attr:`~seer.providers.base.Provider.id_pattern`
    before they are used; an ended sandbox's record is removed :data:`~seer.state.RECORD_TTL`
    after it ended, by :meth:`machines`.
    """

    def __init__(self, provider: type[Provider]):
        self.provider = provider

    @property
    def dir(self) -> Path:
        """The folder of the records (made private to the user on first use)."""
        return private_dir(seer_home() / self.provider.name / "sandboxes")

    def valid(self, sandbox_id: str) -> bool:
        """Whether an id (read from a disk, a label, an SDK) has the provider's form."""
        try:
            check_sandbox_id(sandbox_id, self.provider)
        except SandboxNotFoundError:
            return False
        return True

    def path(self, sandbox_id: str) -> Path:
        """The record file of a sandbox; an id of the wrong form is refused, never used as a path."""
        return self.dir / f"{check_sandbox_id(sandbox_id, self.provider)}.json"

    def read(self, sandbox_id: str) -> dict[str, Any] | None:
        """A sandbox's record, or None when there is none (or it cannot be read)."""
        with contextlib.suppress(OSError, ValueError):
            record = read_json(self.path(sandbox_id))
            return record if isinstance(record, dict) else None
        return None

    def update(self, sandbox_id: str, **changes: Any) -> dict[str, Any]:
        """Merge ``changes`` into a sandbox's record (making it if need be); the record written."""
        record = self.read(sandbox_id) or {"id": sandbox_id}
        record.update(changes)
        write_json(self.path(sandbox_id), record)
        return record

    def forget(self, sandbox_id: str) -> None:
        """Remove a record (a start that failed and cleaned up after itself)."""
        self.path(sandbox_id).unlink(missing_ok=True)

    def begin(
        self,
        sandbox_id: str,
        *,
        name: str,
        timeout: float,
        labels: Mapping[str, str],
        watch: bool = True,
        **extra: Any,
    ) -> dict[str, Any]:
        """Record a sandbox being made, by this client; with ``watch``, start the starter watch
        (:func:`watch_starter_main`), which ends it through ``Provider.terminate`` if this client
        dies before ``start()`` finished. Call it before making anything."""
        now = time.time()
        record = self.update(
            sandbox_id,
            name=name,
            status=MachineStatus.RUNNING.value,
            created_at=now,
            expires_at=now + timeout,
            labels=dict(labels),
            starter=starter_info(),
            **extra,
        )
        if watch:
            self._watch(sandbox_id)
        return record

    def started(self, sandbox_id: str) -> None:
        """``start()`` finished: the sandbox now outlives its client (the watch leaves it be)."""
        if self.read(sandbox_id) is not None:
            self.update(sandbox_id, starter=None)

    def end(self, sandbox_id: str, status: MachineStatus = MachineStatus.TERMINATED) -> None:
        """Record that this client ended the sandbox (unless it had ended already)."""
        record = self.read(sandbox_id)
        if record is not None and record.get("status") in (None, MachineStatus.RUNNING.value):
            self.update(sandbox_id, status=status.value, ended_at=time.time(), starter=None)

    @staticmethod
    def starting(record: Mapping[str, Any] | None) -> bool:
        """Whether the client that began the sandbox still runs and has not finished ``start()``."""
        return bool(record and record.get("starter") and starter_alive(record["starter"]))

    @staticmethod
    def ended_status(record: Mapping[str, Any] | None, expires_at: float | None = None) -> MachineStatus:
        """The status of a sandbox whose machine is gone: what the record says if it ended
        knowingly, else ``expired`` past its deadline, else ``lost``."""
        if record and record.get("status") and record["status"] != MachineStatus.RUNNING.value:
            return MachineStatus(record["status"])
        deadline = expires_at if expires_at is not None else (record or {}).get("expires_at")
        if deadline is not None and time.time() >= float(deadline) - EXPIRY_SLACK:
            return MachineStatus.EXPIRED
        return MachineStatus.LOST

    def settle(
        self, sandbox_id: str, expires_at: float | None = None, record: dict[str, Any] | None = None
    ) -> MachineStatus:
        """The status of a sandbox whose machine is gone, written into its record (with when it
        was first known) so it stays what it was first seen as."""
        record = record if record is not None else self.read(sandbox_id)
        status = self.ended_status(record, expires_at)
        if record is not None and record.get("status") != status.value:
            record.update(status=status.value, ended_at=time.time())
            write_json(self.path(sandbox_id), record)
        return status

    def status(self, sandbox_id: str, *, alive: bool, expires_at: float | None = None) -> MachineStatus:
        """``running`` while the machine is ``alive`` (as the provider sees it), else settled."""
        return MachineStatus.RUNNING if alive else self.settle(sandbox_id, expires_at)

    def machines(
        self, live: Iterable[MachineInfo] = (), alive: Callable[[str], bool] | None = None
    ) -> list[MachineInfo]:
        """What ``Provider.list`` reports: the ``live`` machines the provider found itself (a
        running one shown ``starting`` while its starter lives), then every other recorded one,
        running if ``alive(id)`` says so, else settled; records ended more than
        :data:`~seer.state.RECORD_TTL` ago are removed."""
        out: dict[str, MachineInfo] = {}
        for info in live:
            if info.status is MachineStatus.RUNNING and self.starting(self.read(info.id)):
                info = dataclasses.replace(info, status=MachineStatus.STARTING)
            out[info.id] = info
        folder = self.dir
        for path in sorted(folder.glob("*.json")):
            sandbox_id = path.stem
            if sandbox_id in out or not self.valid(sandbox_id):
                continue
            record = self.read(sandbox_id)
            if record is None or "created_at" not in record:
                continue
            if (
                record.get("status") == MachineStatus.RUNNING.value
                and alive is not None
                and alive(sandbox_id)
            ):
                status = MachineStatus.STARTING if self.starting(record) else MachineStatus.RUNNING
            else:
                status = self.settle(sandbox_id, record=record)
                if time.time() - float(record.get("ended_at", time.time())) > RECORD_TTL:
                    path.unlink(missing_ok=True)
                    continue
            out[sandbox_id] = MachineInfo(
                sandbox_id,
                self.provider.name,
                record.get("name", sandbox_id),
                status,
                float(record["created_at"]),
                record.get("expires_at"),
                record.get("labels", {}),
            )
        return sorted(out.values(), key=lambda m: m.created_at)

    def _watch(self, sandbox_id: str) -> None:
        cls = self.provider
        proc = subprocess.Popen(
            [sys.executable, "-c", _WATCH, cls.__module__, cls.__qualname__, sandbox_id],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        # reaped when it ends (soon after start() finishes), not left a zombie of this client
        threading.Thread(target=proc.wait, name="seer-starter-watch-reaper", daemon=True).start()


_WATCH = "import sys; from seer.providers import kit; sys.exit(kit.watch_starter_main(sys.argv[1:]))"
#: Seconds between the starter watch's looks at the starting client.
WATCH_INTERVAL = 0.5
#: When the watch ends the sandbox again after the first try (a platform still making it).
WATCH_RETRIES = (1.0, 2.5, 5.0)


def watch_starter_main(argv: list[str]) -> int:
    """The starter watch of one sandbox: ``MODULE QUALNAME SANDBOX_ID`` name its provider class.

    Started detached on the client's host by :meth:`Ledger.begin`. While the sandbox's record
    names the client starting it, it checks twice a second that this client still runs. If the
    client dies before ``Sandbox.start`` finished, nobody can use the half-made sandbox: the
    watch records it ``lost`` and ends it with the provider's ``terminate`` (again a few times,
    in case the platform was still making it). It exits as soon as start finishes, the sandbox
    ends some other way or passes its deadline, or its record is gone (a failed start cleaned up).
    """
    module, qualname, sandbox_id = argv
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    ledger = Ledger(cls)
    check_sandbox_id(sandbox_id, cls)
    while True:
        record = ledger.read(sandbox_id)
        if record is None or not record.get("starter"):
            return 0  # started, or cleaned up after a failed start
        if record.get("status") != MachineStatus.RUNNING.value:
            return 0  # ended some other way
        if time.time() > float(record.get("expires_at") or 0):
            return 0  # past its deadline: the platform (or its watchdog) ends it
        if not starter_alive(record["starter"]):
            break
        time.sleep(WATCH_INTERVAL)
    ledger.update(sandbox_id, status=MachineStatus.LOST.value, ended_at=time.time(), starter=None)
    provider = cls()
    started = time.monotonic()
    for at in (0.0, *WATCH_RETRIES):
        time.sleep(max(0.0, started + at - time.monotonic()))
        with contextlib.suppress(Exception):
            provider.terminate(sandbox_id)
    return 0

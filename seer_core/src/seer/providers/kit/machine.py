"""The exec-based machine: a :class:`~seer.providers.base.Machine` whose subclass supplies only
*run a command* (and status, expose_port); exec, background processes, files as tar streams and
the lifetime watchdog are written here once, as shell run in the machine."""

from __future__ import annotations

import contextlib
import io
import posixpath
import secrets
import tarfile
import time
from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from seer.errors import SandboxError, SandboxNotRunningError
from seer.providers.base import (
    Command,
    ExecResult,
    Machine,
    OutputCallback,
    ProcessInfo,
    command_text,
)
from seer.providers.kit.pump import OutputPump

if TYPE_CHECKING:
    from seer.providers.kit.ledger import Ledger

#: The variable marking every process of one exec (value: a random token), so a timeout kills
#: the command's whole tree, even what left its process group.
EXEC_MARK = "SEER_EXEC_ID"

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
leader_is() {  # pid, start time: /proc/pid is that process, or gone (not a later one's)
    local now
    now=$(starttime "$1") || return 0  # gone, or ended (a zombie still holds its number)
    [ "$now" = "$2" ]
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
#: grace; forget it. The group is signalled only while its leader is the recorded process (the
#: KILL also once the leader is gone, where its group may live on in its children).
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
    # Not a group number another process's session took once this one ended (PIDs wrap).
    leader_is "$pid" "$st" && kill -KILL -- "-$pid" 2>/dev/null
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

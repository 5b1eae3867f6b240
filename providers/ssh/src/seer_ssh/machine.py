"""A sandbox on a remote host reached over SSH: the machine seer-ssh and seer-runpod share.

A sandbox is a folder on the host, ``<base>/sandboxes/<id>/`` (see :mod:`seer_ssh.agent`):
``meta.json`` (the remote ledger's record), ``env.sh`` (its environment and secrets, 0600, read by
every command; removed when it ends, so a command after that is refused), ``work/`` (the working
directory) and, for a sandbox with hidden models, ``hf-hub/`` (a model cache of its own). Shared by
all sandboxes on the host: ``<base>/hf-hub`` (the model cache: a model downloads once per host),
``<base>/envs/<hash>`` (one virtual environment per package set, reused),
``<base>/runtime/<sha>`` (seer's runtime, unpacked from the client's wheel) and ``<base>/tools``
(code-server for ``debug=True``, once per host: :mod:`seer_ssh.code_server`).

What SSH gives is exec over channels of one multiplexed connection (:mod:`seer_ssh.connection`),
SFTP and port forwarding (:mod:`seer_ssh.forward`); the provider kit gives the rest: deadlines
that kill a command's whole tree, background processes, and the watchdog, a background process
that ends the sandbox at its timeout with no client: every process carrying the sandbox's mark
is killed, its notebooks and outputs are kept on the host, its files removed.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import select
import shlex
import stat
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import TYPE_CHECKING, Any

from seer.errors import SandboxError, SandboxNotRunningError
from seer.providers.base import MachineSpec, MachineStatus
from seer.providers.kit import ExecMachine, Ledger, OutputPump
from seer.providers.wheel import runtime_requirements, runtime_wheel
from seer.state import RECORD_TTL

from seer_ssh.code_server import tools_dir
from seer_ssh.connection import Connection, ConnectionLost, SshConnectError
from seer_ssh.forward import ensure_forward

if TYPE_CHECKING:
    import paramiko

__all__ = ["AGENT", "MARK", "SshMachine", "provision", "remote_sandboxes"]

#: The variable every process of a sandbox carries (value: its id): what the watchdog kills by.
MARK = "SEER_SSH_SANDBOX"
#: The remote agent's source (sent with every call).
AGENT = resources.files("seer_ssh").joinpath("agent.py").read_text()
#: The exit code and message of a command refused because its sandbox has ended.
_GONE_CODE = 97
_GONE = "seer-ssh: this sandbox has ended"


#: How the host's Python runs the agent: isolated (no ``PYTHON*`` variables, no user site) and
#: without ``site``, whose import of the system's site-packages and ``.pth`` files (many, on an
#: ML image) is a good part of a Python start; the agent uses the standard library only.
AGENT_FLAGS = ("-I", "-S")


def agent_argv(python: str, *args: str) -> list[str]:
    """The argv running the agent with ``args`` on the host's ``python``."""
    return [python, *AGENT_FLAGS, "-c", AGENT, *args]


def agent(conn: Connection, *args: str, stdin: bytes | None = None, timeout: float = 120.0) -> Any:
    """Run the remote agent; its JSON answer. A failure raises, with what it printed."""
    line = shlex.join(agent_argv(conn.options.python, *args))
    code, out, err = conn.run(line, stdin=stdin, timeout=timeout)
    if code != 0:
        why = (err.strip() or out.strip()).splitlines()[-12:]
        if code == 127:
            why = [f"no Python {conn.options.python!r} on the host (set provider_options python)", *why]
        raise SandboxError(f"seer's agent on {conn.options.address} failed ({args[0]}): " + "\n".join(why))
    return json.loads(out.strip().splitlines()[-1])


def remote_sandboxes(conn: Connection, base: str, sandbox_id: str | None = None) -> list[dict[str, Any]]:
    """The remote ledger's records (ended ones for a day), reaping any whose watchdog is gone."""
    args = ["ls", base, str(RECORD_TTL)] + ([sandbox_id] if sandbox_id else [])
    return list(agent(conn, *args))


class SshMachine(ExecMachine):
    """One sandbox on a remote host."""

    #: the provider this machine belongs to (its forwards live under ``$SEER_HOME/<name>/``)
    provider_name = "ssh"
    #: whether the sandbox's commands run on the host its connection logs into, so that the
    #: agent's ``begin`` there may find the environment as the sandbox's interpreter keys it
    #: (seer-slurm's node machine says no: the login node's Python need not be the node's)
    begin_finds_env: bool = True

    def __init__(self, conn: Connection, sandbox_id: str, record: Mapping[str, Any], ledger: Ledger):
        self.conn = conn
        self.id = sandbox_id
        self.base = record["base"]
        self.dir = posixpath.join(self.base, "sandboxes", sandbox_id)
        self.workdir = record.get("workdir") or posixpath.join(self.dir, "work")
        self.python = record.get("python") or conn.options.python
        self.expires_at = float(record.get("expires_at") or 0) or None
        self._cache = record.get("model_cache") or posixpath.join(self.base, "hf-hub")
        self.packages_installed = True
        self.ledger = ledger
        #: what attaching needs to know (the remote record, the client ledger's extra fields)
        self.record = {**record, "base": self.base, "workdir": self.workdir, "python": self.python}

    def gone(self) -> bool:
        """Whether the machine under the sandbox is known to be gone, when its host cannot be
        reached (seer-ssh cannot tell: a host of your own may just be away; seer-runpod asks the
        API). A True answer turns a failed connection into ``SandboxNotRunningError``."""
        return False

    @contextlib.contextmanager
    def _reaching(self) -> Iterator[None]:
        """Around every use of the connection: a host that cannot be reached because the machine
        is gone is the sandbox not running, not a network error."""
        try:
            yield
        except (SshConnectError, ConnectionLost, EOFError):
            if self.gone():
                raise self.not_running() from None
            raise

    @property
    def env_file(self) -> str:
        return posixpath.join(self.dir, "env.sh")

    # --- what the kit runs on ---------------------------------------------------------------
    def command_line(self, argv: list[str], env: Mapping[str, str], cwd: str) -> str:
        """The shell line sshd runs: refused if the sandbox ended, else its environment file
        read, then ``argv`` with ``env`` added, in ``cwd``."""
        envf = shlex.quote(self.env_file)
        assigns = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
        return (
            f"[ -f {envf} ] || {{ echo {shlex.quote(_GONE)} >&2; exit {_GONE_CODE}; }}; "
            f". {envf} && cd -- {shlex.quote(cwd)} && exec env {assigns} {shlex.join(argv)}"
        )

    def run(
        self, argv: list[str], *, env: Mapping[str, str], cwd: str, stdin: bytes | None, pump: OutputPump
    ) -> int:
        with self._reaching():
            return self._run(argv, env=env, cwd=cwd, stdin=stdin, pump=pump)

    def _run(
        self, argv: list[str], *, env: Mapping[str, str], cwd: str, stdin: bytes | None, pump: OutputPump
    ) -> int:
        import paramiko

        chan = self.conn.open_session()
        try:
            chan.exec_command(self.command_line(argv, env, cwd))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            chan.close()
            raise ConnectionLost(f"could not run a command in sandbox {self.id}: {exc}") from None
        fd = chan.fileno()

        def read() -> bytes | None:
            # one channel carries both streams: read both here, on the waiting thread
            if chan.recv_stderr_ready():
                pump.feed("stderr", chan.recv_stderr(65536))
            if chan.recv_ready():
                return chan.recv(65536) or b""
            if chan.eof_received or chan.closed:
                while chan.recv_stderr_ready():
                    pump.feed("stderr", chan.recv_stderr(65536))
                return b""
            select.select([fd], [], [], 0.05)
            return None

        pump.read_stream(read, "stdout", inline=True)
        if stdin is not None:
            pump.send(stdin, chan.sendall, chan.shutdown_write)
        else:
            chan.shutdown_write()

        def exited(seconds: float) -> bool:
            if chan.exit_status_ready():
                return True
            if chan.closed or not chan.get_transport().is_active():
                raise self._lost(argv)
            chan.status_event.wait(seconds)
            return chan.exit_status_ready()

        try:
            pump.wait(exited, drain=5.0)
            code = chan.recv_exit_status()
        finally:
            chan.close()
        if code == _GONE_CODE and pump.text("stderr").strip() == _GONE:
            raise self.not_running()
        if code == -1:  # the channel closed with no exit status: the connection dropped
            if pump.kill is not None:
                pump.kill()
            raise self._lost(argv)
        return code

    def _lost(self, argv: list[str]) -> ConnectionLost:
        """The error for a connection that dropped under a command. The pump kills the command
        (over a new connection) before it is raised; if that fails too, the watchdog kills it at
        the sandbox's timeout, as it carries the sandbox's mark."""
        text = shlex.join(argv)
        return ConnectionLost(
            f"the SSH connection to {self.conn.options.address} dropped while sandbox {self.id} ran "
            f"`{text[:120]}`; the command was stopped and its output so far discarded. Run it again "
            "(seer reconnects on its own)"
        )

    def _kill_marked(self, token: str) -> None:
        with contextlib.suppress(SandboxError):
            super()._kill_marked(token)

    # --- files: SFTP ----------------------------------------------------------------------
    def _sftp_missing(self, path: str) -> BaseException:
        """What a file missing over SFTP means: the sandbox ended, or just no such file."""
        if not self.alive_on_host():
            return self.not_running()
        return FileNotFoundError(f"{path} (in sandbox {self.id})")

    def write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        import paramiko

        target = self.resolve(path)

        def write(sftp: paramiko.SFTPClient) -> None:
            tmp = f"{target}.seer-tmp"
            try:
                with sftp.open(tmp, "wb") as fh:
                    fh.set_pipelined(True)
                    fh.write(data)
                sftp.chmod(tmp, 0o644 if mode is None else mode)
                sftp.posix_rename(tmp, target)
            except BaseException:
                if self.conn.alive():  # a full disk, say: no partial file stays (else see below)
                    with contextlib.suppress(Exception):
                        sftp.remove(tmp)
                raise

        with self._reaching():
            try:
                try:
                    self.conn.sftp(write)
                except FileNotFoundError:
                    self.make_dirs(posixpath.dirname(target))  # refused if the sandbox ended
                    self.conn.sftp(write)
            except (EOFError, OSError, paramiko.SSHException) as exc:
                if isinstance(exc, OSError) and self.conn.alive():
                    raise
                raise self._upload_lost(target, exc) from None

    def _upload_lost(self, target: str, exc: BaseException) -> ConnectionLost:
        """The error for a connection that dropped under an upload, once its partial file is
        removed over a new connection (if that fails too, the sandbox's end removes it)."""
        tmp = f"{target}.seer-tmp"
        with contextlib.suppress(Exception):
            self.conn.close()
            self.conn.sftp(lambda sftp: sftp.remove(tmp))
        return ConnectionLost(
            f"the SSH connection to {self.conn.options.address} dropped while a file was written to "
            f"{target} in sandbox {self.id} ({type(exc).__name__}: {exc or 'connection closed'}); "
            "nothing was written there. Write it again (seer reconnects on its own)"
        )

    def read_bytes(self, path: str) -> bytes:
        target = self.resolve(path)

        def read(sftp: paramiko.SFTPClient) -> bytes:
            if stat.S_ISDIR(sftp.stat(target).st_mode or 0):
                raise IsADirectoryError(target)
            with sftp.open(target, "rb") as fh:
                fh.prefetch()
                return fh.read()

        with self._reaching():
            try:
                data: bytes = self.conn.sftp(read)
            except FileNotFoundError:
                raise self._sftp_missing(target) from None
        return data

    def existing_dirs(self, paths: list[str]) -> set[str]:
        """Which of ``paths`` are folders, by SFTP stats on the open session (no process started
        in the sandbox: a round trip of the connection each, not a command's). The sandbox's
        environment file is looked at first: one that ended is :class:`SandboxNotRunningError`,
        never "nothing to copy"."""

        def look(sftp: paramiko.SFTPClient) -> set[str]:
            sftp.stat(self.env_file)  # FileNotFoundError: the sandbox ended
            found = set()
            for path in paths:
                try:
                    if stat.S_ISDIR(sftp.stat(self.resolve(path)).st_mode or 0):
                        found.add(path)
                except FileNotFoundError:
                    continue
            return found

        with self._reaching():
            try:
                found: set[str] = self.conn.sftp(look)
            except FileNotFoundError:
                raise self.not_running() from None
        return found

    def model_cache_dir(self) -> str:
        return self._cache

    def tools_dir(self) -> str:
        # beside the shared model cache, shared by the host's sandboxes: code-server comes once
        return tools_dir(self.base)

    # --- network and state ----------------------------------------------------------------
    def forward_spec(self) -> dict[str, Any]:
        """What a forwarder process needs to reach this sandbox's host."""
        return {
            "options": self.conn.options.model_dump(),
            "host_key": self.conn.host_key,
            "alive_path": self.env_file,
            "expires_at": self.expires_at,
        }

    def expose_port(self, port: int) -> str:
        if not self.alive_on_host():
            raise self.not_running()
        local = ensure_forward(self.provider_name, self.id, int(port), self.forward_spec())
        return f"http://127.0.0.1:{local}"

    def alive_on_host(self) -> bool:
        """Whether the sandbox's files are still on the host (it has not ended)."""
        with self._reaching():
            try:
                self.conn.sftp(lambda sftp: sftp.stat(self.env_file))
            except FileNotFoundError:
                return False
        return True

    def status(self) -> MachineStatus:
        assert self.ledger is not None
        try:
            with self._reaching():
                found = remote_sandboxes(self.conn, self.base, self.id)
        except SandboxNotRunningError:
            return self.ledger.settle(self.id, self.expires_at)
        except SandboxError:
            # the host cannot be reached: what this client knows (running, unless it ended it)
            record = self.ledger.read(self.id) or {}
            return MachineStatus(record.get("status") or MachineStatus.RUNNING.value)
        if found and found[0].get("status") == MachineStatus.RUNNING.value:
            return MachineStatus.RUNNING
        if found:
            status = MachineStatus(found[0]["status"])
            self.ledger.end(self.id, status)
            return self.ledger.settle(self.id) if status is MachineStatus.RUNNING else status
        return self.ledger.settle(self.id, self.expires_at)


def provision(
    conn: Connection,
    machine_cls: type[SshMachine],
    sandbox_id: str,
    spec: MachineSpec,
    *,
    base: str,
    ledger: Ledger,
    extra_env: Mapping[str, str] | None = None,
    then: list[str] | None = None,
    links: Mapping[str, str] | None = None,
) -> SshMachine:
    """Make sandbox ``sandbox_id`` on the host ``conn`` reaches: its record and folders (and the
    symbolic links ``links``, ``{link: target}``, before them), its environment file, the
    watchdog that ends it at ``spec.timeout`` (then runs ``then``, an argv, if given), the Python
    environment for ``spec.python_packages`` and seer's runtime. The caller has begun
    ``ledger``'s record and cleans up on failure.

    One round trip when the host has the environment and the runtime already: the agent's
    ``begin`` (folders, links, record, the environment file, the environment found and the file
    completed, then the watchdog started: one Python start), with the connection's SFTP session
    opening beside it. Otherwise the agent's ``env`` (the wheel looked for, uploaded if missing,
    the environment built, streaming its output) follows, the watchdog already running."""
    now = time.time()
    meta = {
        "name": spec.name,
        "labels": dict(spec.labels),
        "created_at": now,
        "expires_at": now + spec.timeout,
        "timeout": spec.timeout,
        "base": base,
    }
    wheel = runtime_wheel()
    remote_wheel = posixpath.join(base, "runtime", f"{wheel.sha256[:16]}.whl")
    # 0700: the model cache names the models it holds; no other user of the host need read it.
    # Made by the agent's begin (relative: in the sandbox's folder), one call for all of it.
    shared_cache = posixpath.join(base, "hf-hub")
    folders = [posixpath.dirname(remote_wheel), "hf-hub" if spec.private_model_cache else shared_cache]
    workdir = posixpath.join(base, "sandboxes", sandbox_id, "work")
    env = {
        **spec.env,
        **spec.secrets,
        **(extra_env or {}),
        "SEER_WORKDIR": workdir,
        "SEER_SANDBOX_ID": sandbox_id,
        MARK: sandbox_id,
        "PYTHONUNBUFFERED": "1",
    }
    cache = posixpath.join(posixpath.dirname(workdir), "hf-hub") if spec.private_model_cache else shared_cache
    machine = machine_cls(conn, sandbox_id, {**meta, "workdir": workdir, "model_cache": cache}, ledger)
    requirements = [*spec.python_packages, *runtime_requirements()]
    # The watchdog ends the sandbox at its deadline whatever happens from then on: begin starts
    # it last, once the record and the environment file are complete, before the sandbox is
    # handed out and before any environment is built (a watchdog that cannot start fails begin,
    # and the caller tears the sandbox down).
    end = agent_argv(conn.options.python, "end", base, sandbox_id, "expired")
    watchdog = {
        "seconds": f"{max(spec.timeout, 0):.0f}",
        "argv": [*end, "--", *then] if then else end,
        "pid_file": posixpath.join(machine.procs_dir, "watchdog.pid"),
        "log": machine.log_path("watchdog"),
    }
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="seer-start") as pool:
        # the connection's SFTP session (a process on the host) opens meanwhile, for the files
        # and teardown's look at what to copy
        pool.submit(_open_sftp, conn)
        # the environment file (secrets included) goes on stdin, never on a command line; when
        # the environment and the runtime are ready, begin completes it and records the python
        made = agent(
            conn,
            "begin",
            base,
            sandbox_id,
            json.dumps(meta),
            json.dumps(folders),
            json.dumps(dict(links or {})),
            "-",
            json.dumps({"requirements": requirements, "wheel": remote_wheel})
            if machine_cls.begin_finds_env
            else "",
            json.dumps(watchdog),
            stdin=_env_lines(env).encode(),
        )
    if made["workdir"] != workdir:  # the agent and this module agree on the layout
        raise SandboxError(f"seer's agent made the sandbox in {made['workdir']}, not {workdir}")
    if made.get("env"):  # begin found it: said as env says it
        key = posixpath.basename(posixpath.dirname(posixpath.dirname(made["env"]["python"])))
        spec.report(f"the Python environment for this package set is there: reused ({key})")
    made_env = made.get("env") or _environment(
        machine,
        requirements,
        args=(base, remote_wheel, sandbox_id),
        wheel=wheel.path,
        report=spec.report,
    )
    machine.python = made_env["python"]
    machine.record.update(python=machine.python)
    return machine


def _environment(
    machine: SshMachine, requirements: list[str], *, args: tuple[str, str, str], wheel: Any, report: Any
) -> dict[str, Any]:
    """The agent's ``env`` for the sandbox: seer's runtime wheel uploaded first when the agent
    says it is missing (then asked again)."""
    conn = machine.conn
    base, remote_wheel, sandbox_id = args
    # the agent records the environment's python in the sandbox's record itself (no "update"),
    # and completes the sandbox's environment file (no second write)
    argv = ["env", base, json.dumps(requirements), remote_wheel, sandbox_id]
    for _ in range(2):
        code, lines = _stream_agent(machine, argv, report)
        if code != 0:
            raise SandboxError(
                f"could not make the sandbox's Python environment on {conn.options.address}:\n{lines}"
            )
        made: dict[str, Any] = json.loads(lines.strip().splitlines()[-1])
        if made.get("wheel") != "missing":
            return made
        conn.sftp(lambda sftp: sftp.put(str(wheel), remote_wheel + ".part"))
        conn.sftp(lambda sftp: sftp.posix_rename(remote_wheel + ".part", remote_wheel))
    raise SandboxError(
        f"seer's runtime wheel uploaded to {remote_wheel} on {conn.options.address} is not there"
    )


def _open_sftp(conn: Connection) -> None:
    """Open the connection's SFTP session now (what fails here is met again at its first use)."""
    with contextlib.suppress(Exception):
        conn.sftp(lambda _sftp: None)


def _env_lines(env: Mapping[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())


def _stream_agent(machine: SshMachine, args: list[str], report: Any) -> tuple[int, str]:
    """Run the agent as a sandbox command (so its output streams to ``report``, and it is killed
    with the sandbox); its exit code and output."""

    def lines(_stream: str, text: str) -> None:
        for line in text.splitlines():
            report(line)

    code, pump = machine.run_pumped(
        agent_argv(machine.conn.options.python, *args), text=f"seer agent {args[0]}", on_output=lines
    )
    return code, pump.text("stdout") + pump.text("stderr")

"""One SSH connection per remote host and process: exec, SFTP and port forwards multiplexed on it.

paramiko's transport carries any number of channels, so every command, file transfer and
forwarded connection of every sandbox on a host shares one TCP connection and one
authentication (:func:`connect` keeps them by host). A dropped connection is made again on next
use; a command that was running when it dropped is reported as such (see
:class:`ConnectionLost`).

Host keys are checked strictly by default: a host that is not in ``known_hosts`` yet, or whose
key changed, is refused with an error that says what was offered and how to accept it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import shlex
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from seer.errors import SandboxError

from seer_ssh.options import SshOptions

if TYPE_CHECKING:
    import paramiko

__all__ = ["Connection", "ConnectionLost", "HostKeyError", "SshConnectError", "connect"]


class SshConnectError(SandboxError):
    """The host could not be reached or logged into; the message says which and why."""


class HostKeyError(SshConnectError):
    """The host's key is unknown or changed (strict known_hosts)."""


class ConnectionLost(SandboxError):
    """The connection dropped while a command ran."""


def fingerprint(key: paramiko.PKey) -> str:
    """``SHA256:...`` as OpenSSH prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _host_entry(options: SshOptions) -> str:
    return options.host if options.port == 22 else f"[{options.host}]:{options.port}"


class Connection:
    """An authenticated SSH connection to one host (made again if it drops)."""

    def __init__(self, options: SshOptions, *, host_key: str | None = None):
        """``host_key``: an OpenSSH public key line the host must offer, instead of known_hosts
        (what a provider that recorded it itself, like seer-runpod, passes)."""
        self.options = options
        self.host_key = host_key
        self._lock = threading.RLock()
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._sftp_lock = threading.Lock()
        self._home: str | None = None
        #: how many times the connection was made (tests and benchmarks read it)
        self.connects = 0

    # --- connecting -----------------------------------------------------------------------
    @property
    def transport(self) -> paramiko.Transport:
        """The live transport, connecting (again) if needed."""
        with self._lock:
            client = self._client
            transport = client.get_transport() if client is not None else None
            if transport is None or not transport.is_active():
                self._connect()
                assert self._client is not None
                transport = self._client.get_transport()
            assert transport is not None
            return transport

    def alive(self) -> bool:
        client = self._client
        transport = client.get_transport() if client is not None else None
        return bool(transport is not None and transport.is_active())

    def _connect(self) -> None:
        import paramiko

        self.close()
        opts = self.options
        client = paramiko.SSHClient()
        known = opts.known_hosts_path()
        if self.host_key is not None:
            kind, data = self.host_key.split()[:2]
            client.get_host_keys().add(
                _host_entry(opts), kind, paramiko.PKey.from_type_string(kind, base64.b64decode(data))
            )
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        else:
            if known.is_file():
                client.load_host_keys(str(known))
            if opts.host_key_policy == "accept-new":
                known.parent.mkdir(parents=True, exist_ok=True)
                known.touch(exist_ok=True)
                client.load_host_keys(str(known))  # new keys are saved here
                client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
            else:
                client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            sock = self._through_jump()
            client.connect(
                opts.host,
                opts.port,
                opts.user,
                sock=sock,
                key_filename=opts.key_path(),
                allow_agent=opts.use_agent,
                look_for_keys=opts.key_file is None,
                timeout=opts.connect_timeout,
                banner_timeout=opts.connect_timeout,
                auth_timeout=opts.connect_timeout,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyError(self._changed_key_message(exc)) from None
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):
                raise HostKeyError(self._unknown_key_message()) from None
            raise SshConnectError(f"could not log into {opts.address}: {exc}") from None
        except (OSError, EOFError) as exc:
            client.close()
            raise SshConnectError(
                f"could not connect to {opts.address}: {type(exc).__name__}: {exc} "
                "(check provider_options host and port, and that sshd runs there)"
            ) from None
        transport = client.get_transport()
        assert transport is not None
        transport.set_keepalive(15)
        _no_delay(transport)
        self._client = client
        self._sftp = None
        self.connects += 1

    def _through_jump(self) -> paramiko.Channel | None:
        """With ``options.jump``: a channel to this host's sshd over the jump host's connection
        (this process's pooled one), which paramiko speaks SSH over; else None."""
        jump = self.options.jump
        if jump is None:
            return None
        try:
            return connect(jump).transport.open_channel(
                "direct-tcpip",
                (self.options.host, self.options.port),
                ("127.0.0.1", 0),
                timeout=self.options.connect_timeout,
            )
        except (OSError, EOFError, _ssh_exception()) as exc:
            if isinstance(exc, SshConnectError):
                raise
            raise SshConnectError(
                f"could not reach {self.options.host}:{self.options.port} through {jump.address}: {exc}"
            ) from None

    def _offered_key(self) -> paramiko.PKey | None:
        import paramiko

        try:
            sock = socket.create_connection(
                (self.options.host, self.options.port), self.options.connect_timeout
            )
            transport = paramiko.Transport(sock)
            try:
                transport.start_client(timeout=self.options.connect_timeout)
                return transport.get_remote_server_key()
            finally:
                transport.close()
        except (OSError, paramiko.SSHException):
            return None

    def _unknown_key_message(self) -> str:
        opts = self.options
        key = self._offered_key()
        offered = f"{key.get_name()} {fingerprint(key)}" if key is not None else "(could not read it)"
        port = f"-p {opts.port} " if opts.port != 22 else ""
        return (
            f"the host key of {_host_entry(opts)} is not in {opts.known_hosts} (known_hosts is strict): "
            f"it offers {offered}. If that is the host's key (ask its admin, or compare with "
            f"`ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` on it), accept it with "
            f"`ssh-keyscan {port}{opts.host} >> {opts.known_hosts}` or one "
            f"`ssh {port}{opts.user}@{opts.host}`, or set provider_options host_key_policy='accept-new'"
        )

    def _changed_key_message(self, exc: Any) -> str:
        opts = self.options
        return (
            f"the host key of {_host_entry(opts)} CHANGED: {opts.known_hosts} has "
            f"{exc.expected_key.get_name()} {fingerprint(exc.expected_key)}, the host offers "
            f"{exc.key.get_name()} {fingerprint(exc.key)}. Refused: someone may be in between. If the "
            f"host was reinstalled, remove the old key with `ssh-keygen -R '{_host_entry(opts)}' -f "
            f"{opts.known_hosts}` and accept the new one"
        )

    def close(self) -> None:
        with self._lock:
            if self._sftp is not None:
                with contextlib.suppress(Exception):
                    self._sftp.close()
                self._sftp = None
            if self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()
                self._client = None

    # --- what runs over it ----------------------------------------------------------------
    def open_session(self) -> paramiko.Channel:
        """A new session channel (the connection made again if it had dropped)."""
        try:
            return self.transport.open_session(timeout=self.options.connect_timeout)
        except (OSError, EOFError, _ssh_exception()) as exc:
            if isinstance(exc, SshConnectError):
                raise
            self.close()  # one more try on a fresh connection
            try:
                return self.transport.open_session(timeout=self.options.connect_timeout)
            except (OSError, EOFError, _ssh_exception()) as again:
                raise SshConnectError(
                    f"could not open a channel to {self.options.address}: {again}"
                ) from None

    def run(
        self, command: str, *, stdin: bytes | None = None, timeout: float = 120.0
    ) -> tuple[int, str, str]:
        """Run a shell line to completion, for the provider's own small steps (not sandbox
        commands: those go through the kit's output pump): ``(exit code, stdout, stderr)``."""
        chan = self.open_session()
        try:
            chan.settimeout(timeout)
            chan.exec_command(command)
            if stdin is not None:
                chan.sendall(stdin)
            chan.shutdown_write()
            out = bytearray()
            err = bytearray()
            deadline = time.monotonic() + timeout
            exited_at: float | None = None
            while True:
                if time.monotonic() > deadline:
                    raise SandboxError(f"`{command[:80]}` on {self.options.address} took over {timeout:g} s")
                if chan.recv_ready():
                    out += chan.recv(65536)
                elif chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                elif chan.exit_status_ready():
                    # sshd may send the exit status before the last of the output: done at the
                    # streams' end (EOF), or a moment after the exit where a background child
                    # of the command holds them open
                    if chan.eof_received or chan.closed:
                        break
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at > _EOF_GRACE:
                        break
                    time.sleep(0.002)
                elif chan.closed:
                    raise ConnectionLost(f"the connection to {self.options.address} dropped")
                else:
                    chan.status_event.wait(0.01)
            while chan.recv_ready():
                out += chan.recv(65536)
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
            code = chan.recv_exit_status()
        except TimeoutError:
            raise SandboxError(
                f"`{command[:80]}` on {self.options.address} took over {timeout:g} s"
            ) from None
        except (OSError, EOFError, _ssh_exception()) as exc:
            raise ConnectionLost(f"the connection to {self.options.address} dropped: {exc}") from None
        finally:
            chan.close()
        return code, out.decode(errors="replace"), err.decode(errors="replace")

    def sftp(self, fn: Callable[[paramiko.SFTPClient], Any]) -> Any:
        """Call ``fn`` with the connection's SFTP session (one, opened on first use)."""
        with self._sftp_lock:
            if self._sftp is None or not self.alive():
                self._sftp = self.transport.open_sftp_client()
            return fn(self._sftp)

    def home(self) -> str:
        """The remote user's home folder."""
        if self._home is None:
            self._home = self.sftp(lambda sftp: sftp.normalize("."))
        return self._home

    def expand(self, path: str) -> str:
        """``~`` at the start of a remote path made the remote home."""
        if path == "~" or path.startswith("~/"):
            return self.home() + path[1:]
        return path

    def open_forward(self, port: int) -> paramiko.Channel:
        """A channel to ``127.0.0.1:port`` on the remote host (``direct-tcpip``)."""
        return self.transport.open_channel(
            "direct-tcpip", ("127.0.0.1", int(port)), ("127.0.0.1", 0), timeout=self.options.connect_timeout
        )

    def python_line(self, source: str, *args: str) -> str:
        """The shell line running ``python -c source args`` with the options' remote Python."""
        return shlex.join([self.options.python, "-c", source, *args])


def _no_delay(transport: paramiko.Transport) -> None:
    """Send each SSH packet at once (``TCP_NODELAY``, as OpenSSH's client does): paramiko leaves
    Nagle's algorithm on, so a request made of several small packets (a channel's open, its
    exec, an SFTP call after one) waited for the host's delayed ACK, about 40 ms, before its
    last packet went. A jump host's channel is no socket: its own connection carries the flag."""
    sock = transport.sock
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _ssh_exception() -> type[Exception]:
    import paramiko

    return paramiko.SSHException


#: How long :meth:`Connection.run` waits for a command's streams to end after its exit status.
_EOF_GRACE = 2.0

_pool_lock = threading.Lock()
_pool: dict[tuple[Any, ...], Connection] = {}


def connected(options: SshOptions, *, host_key: str | None = None) -> bool:
    """Whether this process holds a live connection to the host ``options`` name (nothing is
    connected to find out)."""
    with _pool_lock:
        conn = _pool.get((options.model_dump_json(), host_key))
    return conn is not None and conn.alive()


def connect(options: SshOptions, *, host_key: str | None = None) -> Connection:
    """This process's connection to the host ``options`` name (made on first use, shared after)."""
    key = (options.model_dump_json(), host_key)
    with _pool_lock:
        conn = _pool.get(key)
        if conn is None:
            conn = _pool[key] = Connection(options, host_key=host_key)
    conn.transport  # noqa: B018  (connect now: a bad host fails here, clearly)
    return conn

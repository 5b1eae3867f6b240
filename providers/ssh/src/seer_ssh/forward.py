"""Port forwards over SSH: a port on the remote's 127.0.0.1 reached at a port on the client's.

Services seer starts in a sandbox (Jupyter, the RPC server) listen on the remote host's
127.0.0.1 only; nothing is opened on its network. ``Machine.expose_port`` hands the client a
``http://127.0.0.1:<local port>`` URL whose connections travel as ``direct-tcpip`` channels of an
SSH connection. The URL must outlive the process that asked for it (a setup script prints a
Jupyter URL and exits; the agent uses it afterwards), so the forward is served by a small
**forwarder process** started detached on the client (``python -m seer_ssh.forward``): one per
sandbox and remote port, shared by every process that asks, recorded in
``$SEER_HOME/<provider>/forwards/<sandbox>-<port>.json`` (0600). It exits when the sandbox ends
(it looks every few seconds), at the sandbox's deadline, or when ``terminate`` stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seer.errors import SandboxError
from seer.providers.starter import starter_alive, starter_info
from seer.state import private_dir, read_json, seer_home, write_json

if TYPE_CHECKING:
    from seer_ssh.connection import Connection

__all__ = ["ForwardServer", "ensure_forward", "stop_forwards"]

#: Seconds between the forwarder's looks at whether its sandbox still runs.
CHECK_INTERVAL = 3.0


class ForwardServer:
    """Accepts on ``127.0.0.1:<port>`` (a free one) and carries each connection to
    ``127.0.0.1:remote_port`` on the host over ``conn``."""

    def __init__(self, conn: Connection, remote_port: int, *, port: int = 0):
        self.conn = conn
        self.remote_port = int(remote_port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name="seer-ssh-forward", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(
                target=self._carry, args=(client,), name="seer-ssh-forward-conn", daemon=True
            ).start()

    def _carry(self, client: socket.socket) -> None:
        try:
            chan = self.conn.open_forward(self.remote_port)
        except Exception:
            client.close()
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while not self._closed.is_set():
                ready, _, _ = select.select([client, chan], [], [], 1.0)
                if client in ready:
                    data = client.recv(65536)
                    if not data:
                        break
                    chan.sendall(data)
                if chan in ready:
                    data = chan.recv(65536)
                    if not data:
                        break
                    client.sendall(data)
        except OSError:
            pass
        finally:
            chan.close()
            client.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()


# --- the detached forwarder ------------------------------------------------------------------
def _records(provider: str) -> Path:
    return private_dir(seer_home() / provider / "forwards")


def _record_path(provider: str, sandbox_id: str, port: int) -> Path:
    return _records(provider) / f"{sandbox_id}-{int(port)}.json"


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        return True
    return False


def ensure_forward(provider: str, sandbox_id: str, remote_port: int, spec: dict[str, Any]) -> int:
    """The client port forwarding to ``remote_port`` of sandbox ``sandbox_id`` (the sandbox id is
    checked by the caller): the running forwarder's, or a new one's. ``spec`` is what the
    forwarder needs: ``options`` (SshOptions as a dict), ``host_key``, ``alive_path`` (a remote
    file whose presence means the sandbox runs), ``expires_at``."""
    from filelock import FileLock

    record_path = _record_path(provider, sandbox_id, remote_port)
    with FileLock(str(record_path) + ".lock"):
        with contextlib.suppress(OSError, ValueError):
            record = read_json(record_path)
            if starter_alive(record.get("process")) and _answers(int(record["port"])):
                return int(record["port"])
        record_path.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-m", "seer_ssh.forward", str(record_path), str(int(remote_port))],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if record_path.is_file():
                # reaped when it ends, not left a zombie of this client
                threading.Thread(target=proc.wait, name="seer-ssh-forward-reaper", daemon=True).start()
                return int(read_json(record_path)["port"])
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
                why = err.splitlines()[-1] if err else "the forwarder exited"
                raise SandboxError(f"could not forward port {remote_port} of sandbox {sandbox_id}: {why}")
            time.sleep(0.02)
        proc.kill()
        raise SandboxError(f"could not forward port {remote_port} of sandbox {sandbox_id}: no answer in 60 s")


def stop_forwards(provider: str, sandbox_id: str, *, wait: float = 5.0) -> None:
    """Stop every forwarder of a sandbox (its record names the process, checked by start time),
    and wait (up to ``wait`` seconds) until they are gone: once this returns, the sandbox's
    local ports no longer answer."""
    folder = _records(provider)
    stopped = []
    for path in folder.glob(f"{sandbox_id}-*.json"):
        with contextlib.suppress(OSError, ValueError):
            record = read_json(path)
            proc = record.get("process")
            if starter_alive(proc):
                os.kill(int(proc["pid"]), signal.SIGTERM)
                stopped.append(proc)
        path.unlink(missing_ok=True)
    deadline = time.monotonic() + wait
    while any(starter_alive(proc) for proc in stopped) and time.monotonic() < deadline:
        time.sleep(0.02)


def main(argv: list[str]) -> int:
    """``python -m seer_ssh.forward RECORD REMOTE_PORT`` with the spec as JSON on stdin."""
    from seer_ssh.connection import Connection
    from seer_ssh.options import SshOptions

    record_path, remote_port = Path(argv[0]), int(argv[1])
    spec = json.loads(sys.stdin.read())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    conn = Connection(SshOptions.model_validate(spec["options"]), host_key=spec.get("host_key"))
    try:
        conn.transport  # noqa: B018  (connect now, so a failure reaches the starting client)
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    server = ForwardServer(conn, remote_port)
    write_json(record_path, {"port": server.port, "process": starter_info(), "remote_port": remote_port})
    expires_at = float(spec.get("expires_at") or 0) or None
    alive_path = spec["alive_path"]
    while not stop.wait(CHECK_INTERVAL):
        if expires_at is not None and time.time() > expires_at:
            break
        try:
            conn.sftp(lambda sftp: sftp.stat(alive_path))
        except FileNotFoundError:
            break  # the sandbox ended
        except Exception:
            continue  # the network: the next look tries again (the connection is remade)
    server.close()
    conn.close()
    with contextlib.suppress(OSError, ValueError):
        if read_json(record_path).get("process") == starter_info():
            record_path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

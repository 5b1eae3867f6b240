"""A notebook server's first kernel, started by the server process as its very first step.

A kernel that loads models spends seconds importing torch and transformers before it answers.
Started the usual way (``POST /api/kernels`` once the server answers), those seconds came after
the server's own start-up (importing jupyter_server and JupyterLab, loading the collaboration
extension): the two ran one after the other. The server launcher
(:data:`seer.notebook.launch.SERVER_LAUNCHER`) calls :func:`start` before it imports
jupyter_server, so the kernel's imports run while the server starts; the server's first kernel
start then adopts that process instead of launching one (:func:`claim`, called by
:class:`seer.runtime.provisioner.PrestartedProvisioner`, a jupyter_client kernel provisioner).
Later kernels, and restarts, are launched as usual.

The kernel is launched as jupyter_client launches one (the kernelspec's argv and environment over
the server's, a connection file in the runtime directory, its own session, ``JPY_PARENT_PID`` so it
exits with the server), with the standard library only: importing jupyter_client would delay it.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["PROVISIONER_NAME", "Prestarted", "claim", "discard", "remove_connection_file", "start"]

#: The provisioner's entry-point name (group ``jupyter_client.kernel_provisioners``).
PROVISIONER_NAME = "seer-prestarted"


@dataclass
class Prestarted:
    """A kernel process started ahead of the server, and how to connect to it."""

    process: subprocess.Popen[bytes]
    argv: list[str]
    connection: dict[str, Any]
    connection_file: str


_lock = threading.Lock()
_waiting: Prestarted | None = None


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def start(kernel_name: str, *, cwd: str) -> Prestarted:
    """Start the kernel ``kernel_name``'s kernelspec (under ``$JUPYTER_DATA_DIR``) describes, for
    the server's first kernel start to adopt. Call before jupyter_server is imported."""
    global _waiting
    spec_file = os.path.join(os.environ["JUPYTER_DATA_DIR"], "kernels", kernel_name, "kernel.json")
    with open(spec_file) as fh:
        spec = json.load(fh)
    shell, iopub, stdin, control, hb = _free_ports(5)
    connection = {
        "shell_port": shell,
        "iopub_port": iopub,
        "stdin_port": stdin,
        "control_port": control,
        "hb_port": hb,
        "ip": "127.0.0.1",
        "key": secrets.token_hex(16),
        "transport": "tcp",
        "signature_scheme": "hmac-sha256",
        "kernel_name": kernel_name,
    }
    # In the runtime directory, named like the server's own (what stops a dead server's kernels
    # looks for "kernel-" there), readable by this user only.
    path = os.path.join(os.environ["JUPYTER_RUNTIME_DIR"], f"kernel-seer-prestarted-{os.getpid()}.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(connection, fh)
    argv = [arg.replace("{connection_file}", path) for arg in spec["argv"]]
    env = {**os.environ, **spec.get("env", {})}
    env.pop("PYTHONEXECUTABLE", None)  # as jupyter_client does for Python kernels
    env["JPY_PARENT_PID"] = str(os.getpid())  # the kernel exits when the server does
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
    with _lock:
        _waiting = Prestarted(process, argv, connection, path)
        return _waiting


def claim() -> Prestarted | None:
    """The kernel :func:`start` started, once (None if there is none, it was claimed, or it died)."""
    global _waiting
    with _lock:
        found, _waiting = _waiting, None
    if found is None:
        return None
    if found.process.poll() is not None:
        remove_connection_file(found)
        return None
    return found


def remove_connection_file(kernel: Prestarted) -> None:
    """Remove the connection file :func:`start` wrote (the kernel read it as it started)."""
    try:
        os.unlink(kernel.connection_file)
    except OSError:
        pass


def discard() -> None:
    """Stop the kernel :func:`start` started if nothing claimed it (the server is stopping)."""
    found = claim()
    if found is None:
        return
    try:
        os.killpg(found.process.pid, signal.SIGKILL)  # its own session: the kernel and its children
    except OSError:
        try:
            found.process.kill()
        except OSError:
            pass
    found.process.wait()
    remove_connection_file(found)

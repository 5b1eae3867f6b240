"""The supervisor of one local sandbox: ``python -m seer.providers.local.supervisor SANDBOX_DIR``.

Started detached by the local provider, it outlives the client. It waits until the sandbox's
deadline passes or it is sent SIGTERM (``terminate()``), then tears the sandbox down (every
process it started, its working directory, after keeping its notebooks and outputs in the client
folder its record names or in ``$SEER_HOME/outputs/<id>/``) and exits. While ``start()`` is under
way it also watches the starting client: if that dies before saying it finished, nobody will ever
get the half-made sandbox, so it is torn down at once (``lost``) rather than left running to its
timeout.

SIGTERM and SIGINT end the sandbox the same way (``terminate()`` sends SIGTERM); SIGHUP is ignored,
as by any process meant to outlive the terminal its client ran in. A supervisor that is killed
outright (SIGKILL, the OOM killer) cannot tear anything down itself, and the sandbox's processes
are not its children (the client starts them), so no parent-death signal reaches them: a *watch*
process forked at start-up holds the read end of a pipe only the supervisor can write, and when
that pipe reports end-of-file (the supervisor has exited, however it died) it tears the sandbox
down if it is still running (``lost``, or ``expired`` past its deadline), rather than leaving its
processes to the next ``seer ls``.

It runs for every local sandbox, so it imports only :mod:`seer.providers.local.sandbox_dir` (no
pydantic, no pluggy): its start-up is paid on every ``start()``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from seer.errors import SandboxNotFoundError
from seer.providers.base import MachineStatus
from seer.providers.local.sandbox_dir import SandboxDir


def _report(stubborn: list[int]) -> None:
    if stubborn:
        print(f"killed, having not ended within the grace after SIGTERM: {stubborn}", flush=True)


def _fork_watch(sandbox: SandboxDir) -> None:
    """Fork the process that ends the sandbox if this one dies without doing so (see the module's
    docstring). It sleeps in one ``read`` until this process exits, and takes no signal a group
    or terminal may send: only the pipe ends it."""
    sys.stdout.flush()  # nothing buffered is written twice
    read_end, write_end = os.pipe()  # neither is inherited by anything this process runs
    if os.fork() != 0:
        os.close(read_end)
        return  # the write end stays open, unwritten, until this process exits
    try:
        os.close(write_end)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        while os.read(read_end, 1):
            pass
        meta = sandbox.meta()
        if meta.get("status") == MachineStatus.RUNNING.value:
            expired = time.time() >= meta["expires_at"]
            status = MachineStatus.EXPIRED if expired else MachineStatus.LOST
            print(f"the supervisor died without tearing down: {status.value}", flush=True)
            _report(sandbox.teardown(status))
    except BaseException as exc:  # a forked child must never return into main()
        if not isinstance(exc, SandboxNotFoundError):
            print(f"the watch failed: {exc!r}", flush=True)
    finally:
        os._exit(0)


def main(sandbox_dir: str) -> int:
    sandbox = SandboxDir(Path(sandbox_dir).name)
    _fork_watch(sandbox)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    expires_at = sandbox.meta()["expires_at"]
    print(f"supervising {sandbox.id} until {time.ctime(expires_at)}", flush=True)
    status = MachineStatus.EXPIRED
    while not stop.is_set():
        remaining = expires_at - time.time()
        if remaining <= 0:
            break
        try:
            meta = sandbox.meta()
        except SandboxNotFoundError:
            print("the sandbox's folder is gone (its start failed and was cleaned up)", flush=True)
            return 0
        if meta.get("starter") and not sandbox.starting(meta):
            print(f"the client starting it (pid {meta['starter'].get('pid')}) died first", flush=True)
            status = MachineStatus.LOST
            break
        stop.wait(min(remaining, 0.5))
    if stop.is_set():
        status = MachineStatus.TERMINATED
    print(f"tearing down: {status.value}", flush=True)
    _report(sandbox.teardown(status))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

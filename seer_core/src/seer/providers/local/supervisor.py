"""The supervisor of one local sandbox: ``python -m seer.providers.local.supervisor SANDBOX_DIR``.

Started detached by the local provider, it outlives the client. It waits until the sandbox's
deadline passes or it is sent SIGTERM (``terminate()``), then tears the sandbox down (every
process it started, its working directory, after keeping its notebooks and outputs in the client
folder its record names or in ``$SEER_HOME/outputs/<id>/``) and exits. While ``start()`` is under
way it also watches the starting client: if that dies before saying it finished, nobody will ever
get the half-made sandbox, so it is torn down at once (``lost``) rather than left running to its
timeout.

It runs for every local sandbox, so it imports only :mod:`seer.providers.local.sandbox_dir` (no
pydantic, no pluggy): its start-up is paid on every ``start()``.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

from seer.errors import SandboxNotFoundError
from seer.providers.base import MachineStatus
from seer.providers.local.sandbox_dir import SandboxDir


def main(sandbox_dir: str) -> int:
    sandbox = SandboxDir(Path(sandbox_dir).name)
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
    sandbox.teardown(status)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

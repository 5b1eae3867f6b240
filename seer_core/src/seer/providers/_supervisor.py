"""The supervisor of one local sandbox: ``python -m seer.providers._supervisor SANDBOX_DIR``.

Started detached by the local provider, it outlives the client. It waits until the sandbox's
deadline passes or it is sent SIGTERM (``terminate()``), then tears the sandbox down (every
process it started, its working directory, after keeping its notebooks and outputs in the client
folder its record names or in ``$SEER_HOME/outputs/<id>/``) and exits.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

from seer.providers.base import MachineStatus
from seer.providers.local import _Sandbox


def main(sandbox_dir: str) -> int:
    sandbox = _Sandbox(Path(sandbox_dir).name)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    expires_at = sandbox.meta()["expires_at"]
    print(f"supervising {sandbox.id} until {time.ctime(expires_at)}", flush=True)
    while not stop.is_set():
        remaining = expires_at - time.time()
        if remaining <= 0:
            break
        stop.wait(min(remaining, 1.0))
    status = MachineStatus.TERMINATED if stop.is_set() else MachineStatus.EXPIRED
    print(f"tearing down: {status.value}", flush=True)
    sandbox.teardown(status)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

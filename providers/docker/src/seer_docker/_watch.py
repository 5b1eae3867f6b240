"""The watcher of one starting docker sandbox: ``python -m seer_docker._watch SANDBOX_ID``.

Started detached on the client's host by :meth:`DockerProvider.create`, before the container is
run. While the sandbox's ledger names the client starting it (``starter``), it checks twice a
second that this client still runs. If the client dies before ``Sandbox.start`` finished (and
cleared ``starter``), nobody can use the half-made sandbox: the watcher removes its container
(again a few times, in case the engine was still creating it) and records it ``lost``. It exits
as soon as start finishes, the sandbox ends, or its ledger is gone (a failed start cleaned up).
"""

from __future__ import annotations

import sys
import time

from seer.ids import check_sandbox_id
from seer.providers.base import MachineStatus
from seer.providers.starter import starter_alive

from seer_docker.provider import DockerProvider, _ledger_read, _ledger_update, docker_client

#: Seconds between looks at the starting client.
INTERVAL = 0.5
#: When to remove the container again after the first try (an engine still creating it).
RETRIES = (1.0, 2.5, 5.0)


def main(sandbox_id: str) -> int:
    check_sandbox_id(sandbox_id, DockerProvider)
    while True:
        record = _ledger_read(sandbox_id)
        if record is None or not record.get("starter"):
            return 0  # started, or cleaned up after a failed start
        if record.get("status") != MachineStatus.RUNNING.value:
            return 0  # ended some other way
        if time.time() > float(record.get("expires_at") or 0):
            return 0  # past its timeout: the container ends by itself
        if not starter_alive(record["starter"]):
            break
        time.sleep(INTERVAL)
    _ledger_update(sandbox_id, status=MachineStatus.LOST.value, ended_at=time.time(), starter=None)
    client = docker_client()
    started = time.monotonic()
    DockerProvider._remove(client, sandbox_id)
    for at in RETRIES:
        time.sleep(max(0.0, started + at - time.monotonic()))
        DockerProvider._remove(client, sandbox_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

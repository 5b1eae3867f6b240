"""The client starting a sandbox, as providers record and watch it.

Between ``Provider.create`` and the end of ``Sandbox.start`` a sandbox is half made: no client
holds a handle on it that anyone could use. If the client dies then (SIGKILL, a closed terminal),
the sandbox should end promptly rather than run to its timeout. A provider records
:func:`starter_info` with the sandbox and has something outside the client (the local supervisor,
the docker watcher) end it once :func:`starter_alive` turns false before
``Machine.start_completed`` was called.
"""

from __future__ import annotations

import json
import os
import select
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping
    from os import PathLike

# What the starter watch's process imports is only this module (and ``seer``'s lazy
# ``__init__``): no ``seer.providers.procs`` or ``seer.state`` at import time (pathlib, tempfile).

__all__ = ["WATCH_INTERVAL", "starter_alive", "starter_info", "watch_record"]

#: Seconds between the starter watch's looks at the starting client.
WATCH_INTERVAL = 0.5
#: A record's ``status`` while its sandbox runs (``MachineStatus.RUNNING``: the starter watch
#: imports this module alone, not the providers' contract; see ``seer.providers.kit.ledger``).
RUNNING = "running"


def starter_info() -> dict[str, Any]:
    """This process, as a record: its pid and kernel start time (so a reused pid is not it)."""
    from seer.providers import procs

    pid = os.getpid()
    return {"pid": pid, "started": procs.start_time(pid)}


def starter_alive(info: Mapping[str, Any] | None) -> bool:
    """Whether the process :func:`starter_info` described still runs. Records are files, so a
    pid that is not a number, or 0 or 1, is no starter."""
    if not info:
        return False
    try:
        pid = int(info.get("pid") or 0)
    except (TypeError, ValueError):
        return False
    from seer.providers import procs

    return pid > 1 and procs.alive(pid, info.get("started"))


def watch_record(record: str | PathLike[str], parent: int | None = None, wake: int | None = None) -> bool:
    """Watch a sandbox's ledger record (``Ledger.path``) until the sandbox needs no watch: True
    when its starter died before ``Sandbox.start`` finished (the caller ends the sandbox), False
    when start finished, the sandbox ended some other way or passed its deadline, or the record
    is gone (a failed start cleaned up). It looks every :data:`WATCH_INTERVAL` seconds.

    ``parent``: the pid of the watch's parent, which is the starter (``Ledger.begin`` starts the
    watch from the starting process): while the watch's parent is still that pid, the starter
    lives (a process whose parent died is given another one), which needs no look at ``/proc``.

    ``wake``: a file descriptor, the read end of a pipe whose write end the starter holds and
    closes when start finishes or the sandbox ends (and the kernel closes when it dies): the
    watch waits on it instead of sleeping, so it looks again at once. After its end of file the
    watch looks every :data:`WATCH_INTERVAL` seconds as without one."""
    while True:
        try:
            with open(record) as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict) or not data.get("starter"):
            return False  # started, or cleaned up after a failed start
        if data.get("status") != RUNNING:
            return False  # ended some other way
        try:
            if time.time() > float(data.get("expires_at") or 0):
                return False  # past its deadline: the platform (or its watchdog) ends it
        except (TypeError, ValueError):
            return False
        alive = os.getppid() == parent if parent is not None else starter_alive(data["starter"])
        if not alive:
            return True
        if wake is None:
            time.sleep(WATCH_INTERVAL)
            continue
        readable, _, _ = select.select([wake], [], [], WATCH_INTERVAL)
        if readable and not os.read(wake, 512):
            wake = None  # the starter closed it (or died): look again now, then every interval

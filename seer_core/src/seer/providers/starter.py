"""The client starting a sandbox, as providers record and watch it.

Between ``Provider.create`` and the end of ``Sandbox.start`` a sandbox is half made: no client
holds a handle on it that anyone could use. If the client dies then (SIGKILL, a closed terminal),
the sandbox should end promptly rather than run to its timeout. A provider records
:func:`starter_info` with the sandbox and has something outside the client (the local supervisor,
the docker watcher) end it once :func:`starter_alive` turns false before
``Machine.start_completed`` was called.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from seer.providers import procs

__all__ = ["starter_alive", "starter_info"]


def starter_info() -> dict[str, Any]:
    """This process, as a record: its pid and kernel start time (so a reused pid is not it)."""
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
    return pid > 1 and procs.alive(pid, info.get("started"))

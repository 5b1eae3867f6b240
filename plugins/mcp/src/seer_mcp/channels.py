"""Claims on a Jupyter session's shared kernel-channel key (:func:`seer_mcp.registry.channel_key`):
one claim file per session under ``$SEER_HOME/mcp-channels``, which a server holds under an
exclusive lock (:func:`seer.state.lock_file`) for as long as it lives.

A claim file nobody holds means nothing (the next claim makes it again), so none is left behind:
a server removes its claims as it exits, and :func:`sweep_claims` (run when a sandbox is
terminated) removes those of servers that were killed. A file another process holds is never
removed.
"""

from __future__ import annotations

import atexit
import hashlib
import threading
from pathlib import Path

from seer.state import lock_file, private_dir, release_lock_file, remove_lock_file, seer_home

__all__ = ["claim_shared_key", "claims_dir", "release_claims", "sweep_claims"]

#: The claims this process holds (descriptor and file), kept while it lives.
_CLAIMS: list[tuple[int, Path]] = []
_lock = threading.Lock()


def claims_dir() -> Path:
    """``$SEER_HOME/mcp-channels`` (private to the user)."""
    return private_dir(seer_home() / "mcp-channels")


def claim_shared_key(session_id: str) -> bool:
    """Whether this process may use the session's shared key: it takes an exclusive lock on the
    session's claim file, without waiting, and keeps it until it exits (the system lets go of it
    however the process ends)."""
    path = claims_dir() / hashlib.sha256(session_id.encode()).hexdigest()[:32]  # an id is never a path
    fd = lock_file(path, wait=False)
    if fd is None:
        return False
    with _lock:
        if not _CLAIMS:
            atexit.register(release_claims)
        _CLAIMS.append((fd, path))
    return True


def release_claims() -> None:
    """Let go of this process's claims, each file removed while still held (run at exit)."""
    with _lock:
        claims = list(_CLAIMS)
        _CLAIMS.clear()
    for fd, path in claims:
        release_lock_file(path, fd)


def sweep_claims() -> list[Path]:
    """Remove the claim files no process holds (their servers were killed); returns those kept."""
    folder = seer_home() / "mcp-channels"
    if not folder.is_dir():
        return []
    return [path for path in sorted(folder.iterdir()) if path.is_file() and not remove_lock_file(path)]

"""Where seer keeps what must outlive a client process: sandbox records, envs, snapshots.

The root is ``$SEER_HOME``, else ``$XDG_STATE_HOME/seer``, else ``~/.local/state/seer``.

Records hold tokens (Jupyter, RPC) and configs (hidden model names), so they are private to the
user: the home and the folders holding records are mode 0700, every file :func:`write_json`
writes is 0600. A sandbox's client record (``sandboxes/<id>.json``) loses its tokens and config
as soon as the sandbox is known to have ended, and is deleted :data:`RECORD_TTL` after that, as
the providers' own ledgers are.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: How long an ended sandbox's records are kept (for ``seer ls --all``, ``seer logs``), counted
#: from when it ended; the local and docker providers' ledgers follow the same rule.
RECORD_TTL = 24 * 3600
#: What a client record keeps once its sandbox has ended: what ``seer ls --all`` / ``seer down``
#: and the research record need, nothing that opens a service or names a hidden model.
_SECRET_KEYS = ("config", "services", "env")


def private_dir(path: Path, *, exist_ok: bool = True) -> Path:
    """Make ``path`` (and its parents) if missing, and make sure it is mode 0700."""
    path.mkdir(mode=0o700, parents=True, exist_ok=exist_ok)
    with contextlib.suppress(OSError):
        if stat.S_IMODE(path.stat().st_mode) != 0o700:
            path.chmod(0o700)
    return path


def seer_home() -> Path:
    """The state directory (created on first use, private to the user)."""
    raw = os.environ.get("SEER_HOME")
    if raw:
        home = Path(raw).expanduser()
    else:
        xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        home = Path(xdg) / "seer"
    return private_dir(home)


def write_json(path: Path, data: Any, *, mode: int = 0o600) -> None:
    """Write JSON atomically (temp file + rename), so readers never see half a file. The file is
    private (0600) unless ``mode`` says otherwise; a missing folder is made private (0700)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any:
    """Read a JSON file written by :func:`write_json`."""
    with open(path) as fh:
        return json.load(fh)


def open_private(path: Path) -> Any:
    """``path`` opened to append bytes, created 0600 (a log may hold a URL with its token)."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")


# --- lock files -------------------------------------------------------------------------------
def lock_file(path: Path, *, wait: bool = True) -> int | None:
    """An open descriptor of ``path`` (made 0600 if missing) under an exclusive ``flock``, which
    the system releases when it is closed or its process ends, however it ends. ``wait=False``:
    None at once if another holds it.

    The lock is always on the file ``path`` names when it returns: a lock taken on a file that
    was removed meanwhile (:func:`remove_lock_file`) is let go and taken again on the new one. So
    lock files can be removed without two holders ever locking different files of one name."""
    import fcntl

    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if _names(path, fd):
            return fd
        os.close(fd)  # removed while this waited for it: take the lock on the file there now


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def release_lock_file(path: Path, fd: int) -> None:
    """Let go of the lock :func:`lock_file` gave as ``fd``, removing ``path`` first (while the lock
    is still held, so nobody else holds it): for a lock file nobody needs once it is let go."""
    try:
        if _names(path, fd):
            path.unlink()
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_lock_file(path: Path) -> bool:
    """Remove the lock file ``path`` unless a process holds its lock (:func:`lock_file`), without
    waiting; whether it is gone. It is removed while this holds the lock, so whoever waited for
    the lock on it takes the lock on a new file instead."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if _names(path, fd):
            path.unlink()
        return True
    finally:
        os.close(fd)


# --- client records ---------------------------------------------------------------------------
def records_dir() -> Path:
    """``$SEER_HOME/sandboxes``: one record per sandbox a client started (see ``Sandbox``)."""
    return private_dir(seer_home() / "sandboxes")


def record_path(sandbox_id: str) -> Path:
    """The client record of ``sandbox_id``, which the caller has checked (:mod:`seer.ids`)."""
    return records_dir() / f"{sandbox_id}.json"


def end_record(sandbox_id: str, status: str, *, now: float | None = None) -> None:
    """Mark the record of a sandbox that ended: drop its tokens, config and environment at once,
    and note when it ended (it expires :data:`RECORD_TTL` later). Missing records are fine."""
    path = record_path(sandbox_id)
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return
    if not isinstance(record, dict):
        return
    ended = {k: v for k, v in record.items() if k not in _SECRET_KEYS}
    ended.setdefault("ended_at", time.time() if now is None else now)
    ended["status"] = status
    if ended != record:
        write_json(path, ended)


def prune_records(
    *, now: float | None = None, ended: Callable[[dict[str, Any]], object] | None = None
) -> None:
    """Expire client records: an ended sandbox's (``ended_at``) or one past its deadline
    (``expires_at``: no sandbox outlives its timeout) loses its tokens, and is deleted once
    :data:`RECORD_TTL` has passed since. Records from older versions are made private.

    ``ended``, if given, is called with every record kept whose sandbox has ended (as it was
    read; it may have been scrubbed since), in the same pass: a start sweeps what ended
    sandboxes leave behind (:func:`seer.outputs.forget_ended_copy`) without reading every record
    a second time. An ``OSError`` it raises for one record (a folder gone) is ignored, as a
    record that cannot be read is."""
    now = time.time() if now is None else now
    for path in records_dir().glob("*.json"):
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):  # a record not a dict too
            if stat.S_IMODE(path.stat().st_mode) & 0o077:
                path.chmod(0o600)
            record = read_json(path)
            ended_at = record.get("ended_at")
            ended_at = float(ended_at) if ended_at is not None else None
            deadline = record.get("expires_at")
            timeout = (record.get("config") or {}).get("timeout")
            if deadline is None and "created_at" in record and timeout is not None:
                # A record from an older version (a scrubbed one has no config left: it has ended_at)
                deadline = float(record["created_at"]) + float(timeout)
            deadline = float(deadline) if deadline is not None else None
            over = ended_at if ended_at is not None else deadline
            if over is None or now < over:
                continue
            if now - over > RECORD_TTL:
                path.unlink(missing_ok=True)
                continue
            if ended_at is None or any(k in record for k in _SECRET_KEYS):
                end_record(path.stem, record.get("status") or "expired", now=over)
            if ended is not None:
                ended(record)

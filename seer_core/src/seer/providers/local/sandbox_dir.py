"""A local sandbox's folder and record, apart from the provider: what its supervisor needs.

:mod:`seer.providers.local.supervisor` runs as its own process for every local sandbox, so what it
imports is paid on every start (and, on a busy machine, competes with the client for the CPU).
This module therefore imports only the standard library and seer's stdlib-only modules
(state, outputs, errors, ids, the provider contract's data types): never the config schema
(pydantic) or the plugin system (pluggy), which :mod:`seer.providers.local.provider` needs;
filelock (tens of milliseconds to import) only once a teardown takes the sandbox's lock.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from seer.errors import SandboxNotFoundError
from seer.ids import check_sandbox_id
from seer.outputs import KEPT_DIRS, keep_tree, recorded_outputs_dir
from seer.providers import procs
from seer.providers.base import MachineStatus
from seer.providers.starter import starter_alive
from seer.state import read_json, seer_home, write_json

if TYPE_CHECKING:
    from filelock import FileLock

__all__ = ["ID_PATTERN", "SUPERVISOR_MODULE", "LocalIds", "RunningProof", "SandboxDir", "local_root"]

#: The module the supervisor runs as (``python -m``); its command line names the sandbox's folder.
SUPERVISOR_MODULE = "seer.providers.local.supervisor"

#: The exact form of a local sandbox's id.
ID_PATTERN = r"local-[0-9a-f]{10}"


class LocalIds:
    """The local provider's name and id form, as :func:`seer.ids.check_sandbox_id` reads them
    from a provider class (``LocalProvider`` itself would bring in pydantic and pluggy)."""

    name: ClassVar[str] = "local"
    id_pattern: ClassVar[str] = ID_PATTERN


def local_root() -> Path:
    """Where local sandboxes' folders live: ``$SEER_HOME/local``."""
    return seer_home() / "local"


def _pid(record: Mapping[str, Any]) -> int | None:
    """``record["pid"]`` as a pid, or None (records are files: they may hold anything)."""
    try:
        pid = int(record.get("pid") or 0)
    except (TypeError, ValueError):
        return None
    return pid if pid > 1 else None


class SandboxDir:
    """Paths and metadata of one local sandbox on disk. The id is checked first: it becomes a path."""

    def __init__(self, sandbox_id: str):
        self.id = check_sandbox_id(sandbox_id, LocalIds)  # type: ignore[arg-type]
        self.dir = local_root() / sandbox_id
        self.meta_path = self.dir / "meta.json"
        self.secrets_path = self.dir / "secrets.json"
        self.root = self.dir / "root"
        self.logs = self.dir / "logs"
        self.procs = self.dir / "procs"
        self.venv = self.dir / "venv"
        self._lock: FileLock | None = None

    @property
    def lock(self) -> FileLock:
        """The lock teardown and record updates hold (made on first use: see the module's docstring)."""
        if self._lock is None:
            from filelock import FileLock

            self._lock = FileLock(str(self.dir / ".lock"))
        return self._lock

    def exists(self) -> bool:
        # A folder that is a link may lead anywhere: it is no sandbox of ours.
        return not self.dir.is_symlink() and self.meta_path.is_file()

    def meta(self) -> dict[str, Any]:
        try:
            if self.dir.is_symlink():
                raise OSError("a link")
            return read_json(self.meta_path)
        except (OSError, ValueError):
            raise SandboxNotFoundError(f"no local sandbox {self.id!r}") from None

    def update(self, **changes: Any) -> dict[str, Any]:
        meta = {**self.meta(), **changes}
        write_json(self.meta_path, meta)
        return meta

    def pgids(self, records: list[dict[str, Any]] | None = None) -> list[int]:
        """The process groups named by ``records`` (default: every one in ``procs/``)."""
        if records is None:
            records = []
            for path in self.procs.glob("*.json"):
                with contextlib.suppress(OSError, ValueError):
                    records.append(read_json(path))
        out = []
        for rec in records:
            with contextlib.suppress(TypeError, ValueError, KeyError):
                pgid = int(rec["pgid"])
                if pgid > 1:  # 0 and 1 are no sandbox's group, whatever a record says
                    out.append(pgid)
        return out

    def supervisor_pid(self, meta: dict[str, Any]) -> int | None:
        """The pid of the sandbox's live supervisor, or None. The pid comes from ``meta.json``,
        which anyone who can write the disk could plant, so the process must also *be* this
        sandbox's supervisor (its command line says so) before anyone signals it."""
        sup = meta.get("supervisor") or {}
        pid = _pid(sup)
        if procs.alive(pid, sup.get("started")) and procs.runs(pid, SUPERVISOR_MODULE, str(self.dir)):
            return pid
        return None

    def supervisor_alive(self, meta: dict[str, Any]) -> bool:
        return self.supervisor_pid(meta) is not None

    def starting(self, meta: dict[str, Any]) -> bool:
        """Whether ``start()`` is still under way: the client that began it is alive and has not
        said it finished (:meth:`LocalMachine.start_completed`)."""
        return starter_alive(meta.get("starter"))

    def status(self) -> MachineStatus:
        """The status, reaping the sandbox if its supervisor died without tearing it down."""
        meta = self.meta()
        status = MachineStatus(meta["status"])
        # A supervisor not yet spawned by a live starter is no sign of death.
        spawning = meta.get("supervisor") is None and self.starting(meta)
        if status is MachineStatus.RUNNING and not spawning and not self.supervisor_alive(meta):
            expired = time.time() >= meta["expires_at"]
            self.teardown(MachineStatus.EXPIRED if expired else MachineStatus.LOST)
            status = MachineStatus(self.meta()["status"])
        return status

    def teardown(self, status: MachineStatus) -> list[int]:
        """Kill everything the sandbox runs, remove its working directory, record ``status``.
        Safe to call from several processes at once, and more than once. Returns the processes
        that had to be SIGKILLed (they had not ended on SIGTERM)."""
        with self.lock:
            meta = self.meta()
            already = MachineStatus(meta["status"]) is not MachineStatus.RUNNING
            stubborn = procs.kill_sandbox_processes(self.id, self.pgids())
            if already:
                return stubborn
            if self.keep_outputs():
                shutil.rmtree(self.root, ignore_errors=True)
            shutil.rmtree(self.venv, ignore_errors=True)
            self.secrets_path.unlink(missing_ok=True)
            self.update(status=status.value, ended_at=time.time())
            return stubborn

    def keep_outputs(self) -> bool:
        """Keep the sandbox's notebooks and outputs before its working directory is removed, so a
        sandbox that expires with no client (or loses its supervisor) leaves them retrievable: in
        the client folder its record names (``outputs_dir``), else ``$SEER_HOME/outputs/<id>/``.
        Where they went is recorded in ``meta.json`` (``kept``) and printed (to the supervisor's
        log). False if they could be written nowhere: then the working directory stays."""
        if not any((self.root / folder).is_dir() for folder in KEPT_DIRS):
            return True
        for dest in (recorded_outputs_dir(self.id), seer_home() / "outputs" / self.id):
            if dest is None:
                continue
            try:
                kept = keep_tree(self.root, dest)
            except OSError as exc:
                print(f"could not keep notebooks and outputs in {dest}: {exc}", flush=True)
                continue
            if kept.files:
                self.update(kept=str(dest))
                print(kept.summary(self.id), flush=True)
            return True
        print(f"notebooks and outputs left in {self.root}", flush=True)
        return False


def _identity(path: Path) -> tuple[int, int, int, int]:
    """What changes whenever ``path`` is written (:func:`~seer.state.write_json` replaces it)."""
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


class RunningProof:
    """A cheap re-check that a sandbox :meth:`SandboxDir.status` found running still is.

    The full check reads ``meta.json`` and the supervisor's ``/proc`` entries (about 170 µs, paid
    before every command and file operation). The proof holds a pidfd on the supervisor, opened
    and *then* verified to be this sandbox's supervisor (so it names that process, whatever pid
    reuse does later), and ``meta.json``'s identity taken before the check. It holds while the
    supervisor has not exited and ``meta.json`` was not rewritten (a teardown, from any client,
    rewrites it): two system calls. When it fails, the caller runs the full check again, which
    also does the reaping. Linux only (``os.pidfd_open``); elsewhere :meth:`take` gives None.
    """

    def __init__(self, pidfd: int, meta_identity: tuple[int, int, int, int], meta_path: Path):
        self._meta_identity, self._meta_path = meta_identity, meta_path
        self._pidfd = pidfd
        self._close = weakref.finalize(self, os.close, pidfd)

    @classmethod
    def take(cls, sandbox: SandboxDir) -> RunningProof | None:
        """A proof for ``sandbox``, whose status was just found running; None where it cannot be
        had (no pidfds here, no supervisor yet, or anything changed meanwhile)."""
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is None:
            return None
        try:
            identity = _identity(sandbox.meta_path)
            meta = sandbox.meta()
        except (OSError, SandboxNotFoundError):
            return None
        if meta.get("status") != MachineStatus.RUNNING.value:
            return None
        pid = _pid(meta.get("supervisor") or {})
        if pid is None:
            return None
        try:
            pidfd = pidfd_open(pid)
        except OSError:
            return None
        if sandbox.supervisor_pid(meta) != pid:  # checked after opening: the fd is that process
            os.close(pidfd)
            return None
        return cls(pidfd, identity, sandbox.meta_path)

    def holds(self) -> bool:
        if not self._close.alive:
            return False
        # A poll object of its own per check: one is not to be polled from two threads at once
        # (CPython raises "concurrent poll() invocation"), and handles are shared by threads.
        poll = select.poll()
        poll.register(self._pidfd, select.POLLIN)
        if poll.poll(0):  # readable: the supervisor has exited
            return False
        try:
            return _identity(self._meta_path) == self._meta_identity
        except OSError:
            return False

    def close(self) -> None:
        self._close()

"""The ledger: the client-side record of a provider's sandboxes (terminated / expired / lost /
starting), and the starter watch that ends a half-made sandbox whose starting client died."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import seer
from seer.errors import SandboxNotFoundError
from seer.ids import check_sandbox_id
from seer.providers.base import (
    MachineInfo,
    MachineStatus,
)
from seer.providers.starter import starter_alive, starter_info, watch_record
from seer.state import RECORD_TTL, private_dir, read_json, seer_home, write_json

if TYPE_CHECKING:
    from seer.providers.base import Provider

#: Slack when deciding whether a machine that vanished had reached its deadline.
EXPIRY_SLACK = 5.0

#: The write end of the pipe that wakes each running starter watch, by (provider name, sandbox
#: id): closing it (start finished, the sandbox ended, its record was forgotten) wakes the watch
#: at once, so it exits within milliseconds of start() rather than at its next look.
_WATCH_WAKERS: dict[tuple[str, str], int] = {}
_WAKERS_LOCK = threading.Lock()


# --- the ledger ------------------------------------------------------------------------------
class Ledger:
    """The client's records of one provider's sandboxes: ``$SEER_HOME/<name>/sandboxes/<id>.json``.

    A record holds what :meth:`begin` was given (name, labels, deadline, anything else the
    provider wants back: a workdir, an address), its ``status`` and, until ``start()`` finishes,
    the ``starter`` client. Records are private (0600 in a 0700 folder); ids read back from the
    disk are checked against the provider's :attr:`~seer.providers.base.Provider.id_pattern`
    before they are used; an ended sandbox's record is removed :data:`~seer.state.RECORD_TTL`
    after it ended, by :meth:`machines`.
    """

    def __init__(self, provider: type[Provider]):
        self.provider = provider

    @property
    def dir(self) -> Path:
        """The folder of the records (made private to the user on first use)."""
        return private_dir(seer_home() / self.provider.name / "sandboxes")

    def valid(self, sandbox_id: str) -> bool:
        """Whether an id (read from a disk, a label, an SDK) has the provider's form."""
        try:
            check_sandbox_id(sandbox_id, self.provider)
        except SandboxNotFoundError:
            return False
        return True

    def path(self, sandbox_id: str) -> Path:
        """The record file of a sandbox; an id of the wrong form is refused, never used as a path."""
        return self.dir / f"{check_sandbox_id(sandbox_id, self.provider)}.json"

    def read(self, sandbox_id: str) -> dict[str, Any] | None:
        """A sandbox's record, or None when there is none (or it cannot be read)."""
        with contextlib.suppress(OSError, ValueError):
            record = read_json(self.path(sandbox_id))
            return record if isinstance(record, dict) else None
        return None

    def update(self, sandbox_id: str, **changes: Any) -> dict[str, Any]:
        """Merge ``changes`` into a sandbox's record (making it if need be); the record written."""
        record = self.read(sandbox_id) or {"id": sandbox_id}
        record.update(changes)
        write_json(self.path(sandbox_id), record)
        return record

    def forget(self, sandbox_id: str) -> None:
        """Remove a record (a start that failed and cleaned up after itself)."""
        self.path(sandbox_id).unlink(missing_ok=True)
        self._wake_watch(sandbox_id)

    def begin(
        self,
        sandbox_id: str,
        *,
        name: str,
        timeout: float,
        labels: Mapping[str, str],
        watch: bool = True,
        **extra: Any,
    ) -> dict[str, Any]:
        """Record a sandbox being made, by this client; with ``watch``, start the starter watch
        (:func:`watch_starter_main`), which ends it through ``Provider.terminate`` if this client
        dies before ``start()`` finished. Call it before making anything."""
        now = time.time()
        record = self.update(
            sandbox_id,
            name=name,
            status=MachineStatus.RUNNING.value,
            created_at=now,
            expires_at=now + timeout,
            labels=dict(labels),
            starter=starter_info(),
            **extra,
        )
        if watch:
            self._watch(sandbox_id)
        return record

    def started(self, sandbox_id: str) -> None:
        """``start()`` finished: the sandbox now outlives its client (the watch leaves it be)."""
        if self.read(sandbox_id) is not None:
            self.update(sandbox_id, starter=None)
        self._wake_watch(sandbox_id)

    def end(self, sandbox_id: str, status: MachineStatus = MachineStatus.TERMINATED) -> None:
        """Record that this client ended the sandbox (unless it had ended already)."""
        record = self.read(sandbox_id)
        if record is not None and record.get("status") in (None, MachineStatus.RUNNING.value):
            self.update(sandbox_id, status=status.value, ended_at=time.time(), starter=None)
        self._wake_watch(sandbox_id)

    @staticmethod
    def starting(record: Mapping[str, Any] | None) -> bool:
        """Whether the client that began the sandbox still runs and has not finished ``start()``."""
        return bool(record and record.get("starter") and starter_alive(record["starter"]))

    @staticmethod
    def ended_status(record: Mapping[str, Any] | None, expires_at: float | None = None) -> MachineStatus:
        """The status of a sandbox whose machine is gone: what the record says if it ended
        knowingly, else ``expired`` past its deadline, else ``lost``."""
        if record and record.get("status") and record["status"] != MachineStatus.RUNNING.value:
            return MachineStatus(record["status"])
        deadline = expires_at if expires_at is not None else (record or {}).get("expires_at")
        if deadline is not None and time.time() >= float(deadline) - EXPIRY_SLACK:
            return MachineStatus.EXPIRED
        return MachineStatus.LOST

    def settle(
        self, sandbox_id: str, expires_at: float | None = None, record: dict[str, Any] | None = None
    ) -> MachineStatus:
        """The status of a sandbox whose machine is gone, written into its record (with when it
        was first known) so it stays what it was first seen as."""
        record = record if record is not None else self.read(sandbox_id)
        status = self.ended_status(record, expires_at)
        if record is not None and record.get("status") != status.value:
            record.update(status=status.value, ended_at=time.time())
            write_json(self.path(sandbox_id), record)
        return status

    def status(self, sandbox_id: str, *, alive: bool, expires_at: float | None = None) -> MachineStatus:
        """``running`` while the machine is ``alive`` (as the provider sees it), else settled."""
        return MachineStatus.RUNNING if alive else self.settle(sandbox_id, expires_at)

    def machines(
        self, live: Iterable[MachineInfo] = (), alive: Callable[[str], bool] | None = None
    ) -> list[MachineInfo]:
        """What ``Provider.list`` reports: the ``live`` machines the provider found itself (a
        running one shown ``starting`` while its starter lives), then every other recorded one,
        running if ``alive(id)`` says so, else settled; records ended more than
        :data:`~seer.state.RECORD_TTL` ago are removed."""
        out: dict[str, MachineInfo] = {}
        for info in live:
            if info.status is MachineStatus.RUNNING and self.starting(self.read(info.id)):
                info = dataclasses.replace(info, status=MachineStatus.STARTING)
            out[info.id] = info
        folder = self.dir
        for path in sorted(folder.glob("*.json")):
            sandbox_id = path.stem
            if sandbox_id in out or not self.valid(sandbox_id):
                continue
            record = self.read(sandbox_id)
            if record is None or "created_at" not in record:
                continue
            if (
                record.get("status") == MachineStatus.RUNNING.value
                and alive is not None
                and alive(sandbox_id)
            ):
                status = MachineStatus.STARTING if self.starting(record) else MachineStatus.RUNNING
            else:
                status = self.settle(sandbox_id, record=record)
                if time.time() - float(record.get("ended_at", time.time())) > RECORD_TTL:
                    path.unlink(missing_ok=True)
                    continue
            out[sandbox_id] = MachineInfo(
                sandbox_id,
                self.provider.name,
                record.get("name", sandbox_id),
                status,
                float(record["created_at"]),
                record.get("expires_at"),
                record.get("labels", {}),
            )
        return sorted(out.values(), key=lambda m: m.created_at)

    def _watch_argv(self, sandbox_id: str) -> list[str]:
        """The starter watch's command line (see ``_WATCH``), for this process as the starter."""
        cls = self.provider
        record = str(self.path(sandbox_id))
        # -S: no site-packages until the starter died (the watch needs only seer's own folder)
        root = str(Path(seer.__file__).resolve().parent.parent)
        args = [cls.__module__, cls.__qualname__, sandbox_id, record, str(os.getpid()), root]
        return [sys.executable, "-S", "-c", _WATCH, *args]

    def _watch(self, sandbox_id: str) -> None:
        """Start the starter watch, its stdin the read end of a pipe whose write end only this
        process holds (non-inheritable): the watch wakes when :meth:`started`, :meth:`end` or
        :meth:`forget` closes it, or when this process dies and the kernel closes it."""
        wake_read, wake_write = os.pipe()
        try:
            proc = subprocess.Popen(
                self._watch_argv(sandbox_id),
                stdin=wake_read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            os.close(wake_write)
            raise
        finally:
            os.close(wake_read)
        self._wake_watch(sandbox_id)  # a watch this process began for the id before, if any
        with _WAKERS_LOCK:
            _WATCH_WAKERS[(self.provider.name, sandbox_id)] = wake_write
        # reaped when it ends (soon after start() finishes), not left a zombie of this client
        threading.Thread(target=proc.wait, name="seer-starter-watch-reaper", daemon=True).start()

    def _wake_watch(self, sandbox_id: str) -> None:
        """Close the pipe that wakes this sandbox's starter watch (if this process started one)."""
        with _WAKERS_LOCK:
            wake_write = _WATCH_WAKERS.pop((self.provider.name, sandbox_id), None)
        if wake_write is not None:
            os.close(wake_write)


# The starter watch's process (argv: MODULE QUALNAME SANDBOX_ID RECORD STARTER_PID SEER_ROOT), run
# with -S. It runs beside every start, and until the starter dies it imports seer.providers.starter
# alone, from seer's own folder (appended: the standard library comes first): site-packages, the
# provider's module (pydantic, an SDK: about 0.6 s of CPU for docker's) and even pathlib would
# compete with the start for the client's CPU, for a watch that almost always just sees the
# start finish. Only when the starter died does it load site-packages, this module and the
# provider, and end_lost checks the id again.
_WATCH = """import sys
sys.path.append(sys.argv[6])
from seer.providers.starter import watch_record
if watch_record(sys.argv[4], parent=int(sys.argv[5]), wake=0):
    import site
    site.main()
    from seer.providers.kit.ledger import end_lost
    sys.exit(end_lost(*sys.argv[1:4]))
"""
#: When the watch ends the sandbox again after the first try (a platform still making it).
WATCH_RETRIES = (1.0, 2.5, 5.0)


def watch_starter_main(argv: list[str]) -> int:
    """The starter watch of one sandbox: ``MODULE QUALNAME SANDBOX_ID`` name its provider class.

    :meth:`Ledger.begin` starts the same watch detached on the client's host (as ``_WATCH``,
    which imports less until the client died). While the sandbox's record
    names the client starting it, it checks twice a second that this client still runs. If the
    client dies before ``Sandbox.start`` finished, nobody can use the half-made sandbox: the
    watch records it ``lost`` and ends it with the provider's ``terminate`` (again a few times,
    in case the platform was still making it). It exits as soon as start finishes, the sandbox
    ends some other way or passes its deadline, or its record is gone (a failed start cleaned up).
    """
    module, qualname, sandbox_id = argv
    ledger = Ledger(_provider_class(module, qualname))
    if not watch_record(ledger.path(sandbox_id)):
        return 0
    return end_lost(module, qualname, sandbox_id)


def _provider_class(module: str, qualname: str) -> Any:
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    return cls


def end_lost(module: str, qualname: str, sandbox_id: str) -> int:
    """The starter of sandbox ``sandbox_id`` died before ``Sandbox.start`` finished: record it
    ``lost`` and end it with the provider's ``terminate`` (the class ``MODULE``.``QUALNAME``),
    again after :data:`WATCH_RETRIES` in case the platform was still making it."""
    cls = _provider_class(module, qualname)
    check_sandbox_id(sandbox_id, cls)
    ledger = Ledger(cls)
    ledger.update(sandbox_id, status=MachineStatus.LOST.value, ended_at=time.time(), starter=None)
    provider = cls()
    started = time.monotonic()
    for at in (0.0, *WATCH_RETRIES):
        time.sleep(max(0.0, started + at - time.monotonic()))
        with contextlib.suppress(Exception):
            provider.terminate(sandbox_id)
    return 0

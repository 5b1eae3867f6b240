"""When a live document is saved: :class:`SaveScheduler` has the Jupyter server write a notebook's
document to its ``.ipynb`` from a thread of its own, requests coalesced.

A save costs the server the whole notebook: it reads every cell out of the document, validates
the notebook, signs it and writes the file (the time grows with the notebook, tens of
milliseconds for a few hundred cells), on the event loop that also carries the kernels' messages.
Saved after every cell, a session running short cells kept the server busy saving what the next
save would write again. So a stream of cells is saved once it pauses (:data:`SAVE_IDLE`), and,
while cells keep coming, at the latest :data:`SAVE_LATEST` after the first cell not yet saved;
never two saves closer than :data:`SAVE_PAUSE`. :meth:`SaveScheduler.flush` saves at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from seer.errors import NotebookError

__all__ = ["SAVE_IDLE", "SAVE_LATEST", "SAVE_PAUSE", "SaveScheduler"]

#: A save is asked for once no cell asked for one for this long (seconds): a burst is saved once.
SAVE_IDLE = 0.25
#: While cells keep asking, they are saved at the latest this long after the first of them.
SAVE_LATEST = 2.0
#: Least time between two saves.
SAVE_PAUSE = 0.5


class SaveScheduler:
    """Calls ``save`` (which raises :class:`~seer.errors.NotebookError` when the server could not
    write the file) from a thread of its own, as :meth:`request` asks. Thread-safe."""

    def __init__(self, save: Callable[..., None], *, name: str = "seer-live-save"):
        self._save = save
        self._name = name
        self._cond = threading.Condition()
        #: why the last save failed (None: it did not, or none ran yet)
        self.error: str | None = None
        #: when the first and the last request not yet saved came (None: none is pending)
        self._since: float | None = None
        self._latest = 0.0
        self._last_save = 0.0
        self._running = False
        self._flushing = 0
        self._stopped = False
        self._thread: threading.Thread | None = None

    def request(self) -> None:
        """Have the document saved soon (see the module's docstring for when)."""
        with self._cond:
            self._latest = time.monotonic()
            if self._since is not None:
                return  # the thread already waits for this one's time
            self._since = self._latest
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                if self._since is None or self._flushing:
                    self._cond.wait()
                    continue
                due = max(
                    self._last_save + SAVE_PAUSE,
                    min(self._latest + SAVE_IDLE, self._since + SAVE_LATEST),
                )
                pause = due - time.monotonic()
                if pause > 0:
                    self._cond.wait(pause)
                    continue
                self._since = None
                self._running = True
            error = None
            try:
                self._save()
            except NotebookError as exc:
                error = str(exc)
            with self._cond:
                self.error = error
                self._running = False
                self._last_save = time.monotonic()
                self._cond.notify_all()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until no save is pending or under way; whether so."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._since is not None or self._running) and not self._stopped:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def flush(self, timeout: float) -> None:
        """Save now, in this thread, once a save under way has ended: what was asked for so far
        is in it. Raises :class:`~seer.errors.NotebookError` when the server could not write
        the file (or a save under way kept it past ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
        try:
            with self._cond:
                while self._running:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise NotebookError(
                            f"the Jupyter server did not answer the saves asked for within {timeout:g}s"
                        )
                    self._cond.wait(left)
                self._since = None  # the save below holds every change sent before it
            try:
                self._save(timeout=max(deadline - time.monotonic(), 0.001))
            except NotebookError as exc:
                self.error = str(exc)
                raise
            self.error = None
        finally:
            with self._cond:
                self._flushing -= 1
                self._last_save = time.monotonic()
                self._cond.notify_all()

    def stop(self, join: float = 0.0) -> None:
        """No more saves (a pending one is dropped); wait up to ``join`` seconds for the thread."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        thread = self._thread
        if join > 0 and thread is not None and thread is not threading.current_thread():
            thread.join(timeout=join)

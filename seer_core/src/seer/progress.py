"""Progress for slow steps: a live spinner on a terminal, quiet (logging only) elsewhere."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.status import Status

log = logging.getLogger("seer")


class Progress:
    """Shows what a long operation is doing. ``step()`` wraps each phase."""

    def __init__(self, *, enabled: bool | None = None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._status: Status | None = None
        if self.enabled:
            from rich.console import Console

            self._console = Console(stderr=True)

    @contextlib.contextmanager
    def step(self, text: str) -> Iterator[None]:
        """Show ``text`` while the block runs; log how long it took."""
        started = time.monotonic()
        log.info("%s ...", text)
        if not self.enabled:
            yield
        else:
            with self._console.status(text) as status:
                self._status = status
                try:
                    yield
                finally:
                    self._status = None
        log.info("%s: done in %.1fs", text, time.monotonic() - started)

    def update(self, text: str) -> None:
        """Replace the current step's text (e.g. with a line of installer output)."""
        log.debug(text)
        if self._status is not None:
            self._status.update(text[:120])

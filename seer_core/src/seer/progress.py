"""Progress for slow steps, on stderr by default: starting a sandbox on a cloud provider can take
minutes, and silence then looks like a hang.

On a terminal each step shows as a live spinner (the latest line of installer or download output
under it) and a line saying how long it took; elsewhere (a pipe, a file, an agent's harness) each
step is a plain ``seer: ...`` line when it starts and when it ends, with at most one line of its
output per :data:`UPDATE_INTERVAL` seconds in between. Stdout is never touched, so a setup script's
JSON stays alone there.

Quiet: ``Progress(enabled=False)``, ``Sandbox(config, progress=False)``, ``start(progress=False)``,
``seer up --quiet``, or ``SEER_QUIET=1`` in the environment (which wins over every default).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.status import Status

log = logging.getLogger("seer")

#: Environment variable that silences progress everywhere (any value but "", "0", "false", "no").
QUIET_ENV = "SEER_QUIET"
#: Seconds between two lines of a step's output when stderr is not a terminal.
UPDATE_INTERVAL = 2.0
#: The longest line of a step's output shown.
_MAX_LINE = 160


def quiet_by_env() -> bool:
    """Whether ``$SEER_QUIET`` asks for no progress."""
    return os.environ.get(QUIET_ENV, "").strip().lower() not in ("", "0", "false", "no")


class Progress:
    """Shows what a long operation is doing on stderr. ``step()`` wraps each phase, ``update()``
    passes a line of its output, ``note()`` says one thing that must be seen (where files went).

    ``enabled=None`` (the default) shows progress unless ``$SEER_QUIET`` is set; ``False``
    silences it (it is still logged on the ``seer`` logger); ``True`` shows it even so.
    """

    def __init__(self, *, enabled: bool | None = None):
        self.enabled = not quiet_by_env() if enabled is None else enabled
        self._status: Status | None = None
        self._last_update = 0.0

    @staticmethod
    def _console() -> Console:
        from rich.console import Console

        # Made per use: tests and CLI runners swap sys.stderr.
        return Console(stderr=True, highlight=False, soft_wrap=True)

    @staticmethod
    def _plain(text: str) -> None:
        with contextlib.suppress(Exception):
            sys.stderr.write(f"seer: {text}\n")
            sys.stderr.flush()

    @contextlib.contextmanager
    def step(self, text: str) -> Iterator[None]:
        """Show ``text`` while the block runs, then how long it took (or that it failed)."""
        started = time.monotonic()
        log.log(logging.DEBUG if self.enabled else logging.INFO, "%s ...", text)
        console = self._console() if self.enabled else None
        failed = False
        try:
            if console is None:
                yield
            elif console.is_terminal:
                with console.status(text) as status:
                    self._status = status
                    try:
                        yield
                    finally:
                        self._status = None
            else:
                self._plain(f"{text} ...")
                self._last_update = 0.0  # a step's first line of output shows at once
                yield
        except BaseException:
            failed = True
            raise
        finally:
            took = time.monotonic() - started
            outcome = "failed" if failed else "done"
            log.log(logging.DEBUG if self.enabled else logging.INFO, "%s: %s in %.1fs", text, outcome, took)
            if console is not None:
                self._plain(f"{text}: {outcome} in {took:.1f}s")

    def update(self, text: str) -> None:
        """A line of the current step's output (an installer's, a download's)."""
        log.debug(text)
        if not self.enabled or not text.strip():
            return
        line = text.strip().splitlines()[-1][:_MAX_LINE]
        if self._status is not None:
            self._status.update(line)
            return
        now = time.monotonic()
        if now - self._last_update >= UPDATE_INTERVAL:
            self._last_update = now
            self._plain(f"  {line}")

    def note(self, text: str) -> None:
        """One line the user must see (e.g. where a sandbox's notebooks were copied)."""
        log.info(text)
        if self.enabled:
            self._plain(text)

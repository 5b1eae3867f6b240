"""The sandbox's Jupyter server keeps each live document's updates (jupyter-collaboration's
"YStore": what JupyterLab's document timeline replays) in this process's memory.

jupyter-collaboration's own store is SQLite (``SQLiteYStore``), even with its database in memory:
every update a writer sends (each cell a session records) cost a query, an insert and a commit,
each a hop to aiosqlite's thread and back, on the server's event loop, the loop that also carries
the kernels' messages. :class:`MemoryYStore` appends to a list instead. It keeps what the SQLite
store kept in memory (every update of the room, with its time, for as long as the room lives), and
like it starts empty for every room, so a room loads its notebook from the ``.ipynb`` as before.

The server's launcher (:data:`seer.notebook.launch.SERVER_LAUNCHER`) selects it where seer's
runtime is installed beside the server; elsewhere the server keeps jupyter-collaboration's store.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from logging import Logger
from typing import Any

from pycrdt.store import BaseYStore, YDocNotFound

__all__ = ["MemoryYStore"]


class MemoryYStore(BaseYStore):
    """A room's document updates, in memory: ``(update, metadata, timestamp)`` in order."""

    def __init__(
        self,
        path: str,
        metadata_callback: Callable[[], Awaitable[bytes] | bytes] | None = None,
        log: Logger | None = None,
        **_config: Any,  # jupyter-collaboration passes its traitlets config to every store
    ):
        self.path = path
        self.metadata_callback = metadata_callback
        self.log = log
        self._updates: list[tuple[bytes, bytes, float]] = []
        if log is not None:
            log.info("The updates of %s are kept in memory (seer.runtime.ystore)", path)

    async def write(self, data: bytes) -> None:
        """Keep ``data`` (one update), with the store's metadata and the time."""
        self._updates.append((data, await self.get_metadata(), time.time()))

    async def read(self) -> AsyncIterator[tuple[bytes, bytes, float]]:
        """Every update kept so far, oldest first; ``YDocNotFound`` when there is none (the room
        then loads the document from its file)."""
        if not self._updates:
            raise YDocNotFound
        for item in list(self._updates):
            yield item

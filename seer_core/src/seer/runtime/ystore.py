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

Neither store outlives the server, and the server saves a room to its ``.ipynb`` only when a
writer asks (``document_save_delay`` is off). A server stopped by SIGTERM (a sandbox terminated,
a container stopped) would lose the cells written since the last save: :func:`save_rooms_on_stop`
has jupyter-collaboration's extension save every live room first, at most
:data:`STOP_SAVE_TIMEOUT` seconds (the launcher calls it where this module is installed).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from logging import Logger
from typing import Any

from pycrdt.store import BaseYStore, YDocNotFound

__all__ = ["STOP_SAVE_TIMEOUT", "MemoryYStore", "save_rooms", "save_rooms_on_stop"]

#: Seconds a stopping server gives its live rooms to be saved (a provider's SIGTERM-to-SIGKILL
#: grace is 2 s at the least: the local provider's).
STOP_SAVE_TIMEOUT = 1.5


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


async def save_rooms(server: Any, timeout: float, log: Logger | None = None) -> list[str]:
    """Save every live document room of ``server`` (jupyter-collaboration's websocket server) to
    its file, as a writer's "save" message does, waiting at most ``timeout`` seconds in all;
    returns the rooms not saved in time. A room busy loading its file (its update lock held) is
    asked again until it can be."""
    from jupyter_server_ydoc.rooms import DocumentRoom

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    waiting = {name: room for name, room in list(server.rooms.items()) if isinstance(room, DocumentRoom)}
    saving: dict[asyncio.Future[Any], str] = {}
    while waiting and loop.time() < deadline:
        for name, room in list(waiting.items()):
            task = room._save_to_disc()  # what the websocket handler calls for a "save" message
            if task is not None:
                saving[task] = name
                del waiting[name]
        if waiting:
            await asyncio.sleep(0.02)
    if saving:
        await asyncio.wait(saving, timeout=max(deadline - loop.time(), 0.0))
    late = sorted(set(waiting) | {name for task, name in saving.items() if not task.done()})
    if log is not None:
        if late:
            log.warning("Stopping: not saved within %g s: %s", timeout, ", ".join(late))
        else:
            log.info("Stopping: saved %d live document(s)", len(saving))
    return late


def save_rooms_on_stop(timeout: float = STOP_SAVE_TIMEOUT) -> bool:
    """Have jupyter-collaboration's server extension save every live room (:func:`save_rooms`)
    before it stops (the server's SIGTERM handler stops every extension); False when
    jupyter-collaboration is not installed."""
    try:
        from jupyter_server_ydoc.app import YDocExtension
    except ImportError:
        return False
    stop = YDocExtension.stop_extension
    if getattr(stop, "seer_saves_rooms", False):
        return True

    async def stop_extension(self: Any) -> None:
        server = getattr(self, "ywebsocket_server", None)
        if server is not None:
            try:
                await save_rooms(server, timeout, getattr(self, "log", None))
            except Exception:  # stopping goes on whatever a save did
                if getattr(self, "log", None) is not None:
                    self.log.exception("Stopping: saving the live documents failed")
        await stop(self)

    stop_extension.seer_saves_rooms = True  # type: ignore[attr-defined]
    YDocExtension.stop_extension = stop_extension
    return True

"""Where a session's notebook text goes: :data:`NotebookWriter`, and the default one,
:func:`write_notebook` (the client copy, then the sandbox's ``.ipynb``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from seer.errors import (
    NotebookError,
)
from seer.notebook.client import (
    quote_path,
)

if TYPE_CHECKING:
    from seer.notebook.session import NotebookSession


#: Writes a session's rendered notebook (the ``.ipynb`` text) wherever it is kept; see
#: :attr:`NotebookSession.writer`.
NotebookWriter = Callable[["NotebookSession", str], None]


def write_notebook(session: NotebookSession, text: str) -> None:
    """The default :data:`NotebookWriter`: ``text`` (rendered from the session's replica of the
    notebook) into the client copy first, replaced atomically so a reader never sees half a
    notebook; then the notebook in the sandbox. With a live document (:attr:`NotebookSession.live`)
    the Jupyter server writes the sandbox's ``.ipynb`` from the document, and this asks it to now;
    without one, ``text`` is written there (through the Jupyter contents API, as a text file, for a
    session without a sandbox object: the same bytes either way).

    The client copy is written whatever happens to the sandbox's (a full disk there): a failure
    to write the sandbox's copy is raised after it, as :class:`~seer.errors.NotebookError`."""
    mirror = session.local_path
    if mirror is not None:
        mirror.parent.mkdir(parents=True, exist_ok=True)
        # a name of this writer's own: other writers (sessions, MCP servers) keep the same copy
        tmp = mirror.with_name(f".{mirror.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        # 0600, as seer's records: the agent's work may hold what it found or printed
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, mirror)
    live = session.live
    if live is not None:
        live.request_save()
        if live.save_error is not None:
            kept = f"; the client copy is {mirror}" if mirror is not None else ""
            raise NotebookError(f"the notebook in the sandbox could not be saved: {live.save_error}{kept}")
    elif session.sandbox is not None:
        session.sandbox.write_file(session.notebook_path, text)
    else:
        session.client.call(
            "PUT",
            f"/api/contents/{quote_path(session.notebook_path)}",
            {"type": "file", "format": "text", "content": text},
        )

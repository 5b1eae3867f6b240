"""Where a session's notebook text goes: :data:`NotebookWriter`, and the default one,
:func:`write_notebook` (the client copy, then the sandbox's ``.ipynb``)."""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

from seer.errors import (
    NotebookError,
)
from seer.notebook.client import (
    quote_path,
)
from seer.outputs import CopyWrite, state_covers, state_vector, write_client_copy

if TYPE_CHECKING:
    from seer.notebook.session import NotebookSession


#: Writes a session's rendered notebook (the ``.ipynb`` text) wherever it is kept; see
#: :attr:`NotebookSession.writer`.
NotebookWriter = Callable[["NotebookSession", str], None]


log = logging.getLogger("seer")

#: The live document's state the text being handed to a writer was rendered at (see
#: :func:`rendered_state`); per thread, set by the session's save around its writer's call.
_RENDERED_STATE: contextvars.ContextVar[bytes | None] = contextvars.ContextVar(
    "seer_rendered_state", default=None
)
#: How long a writer whose replica lacks updates the client copy holds waits for them.
CATCH_UP_WAIT = 5.0
#: How many times a writer renders again after catching up before it writes regardless.
_CATCH_UPS = 3
_CATCHING_UP: contextvars.ContextVar[int] = contextvars.ContextVar("seer_catching_up", default=0)


def rendered_state() -> bytes | None:
    """In a :data:`NotebookWriter`: the state vector of the live document the text it was handed
    was rendered at (None: no live document). A writer that writes later, from another thread,
    keeps it with the text and passes it to :func:`write_notebook`."""
    return _RENDERED_STATE.get()


@contextmanager
def rendered_at(state: bytes | None) -> Iterator[None]:
    """Within: :func:`rendered_state` is ``state`` (the session's save sets it for its writer)."""
    token = _RENDERED_STATE.set(state)
    try:
        yield
    finally:
        _RENDERED_STATE.reset(token)


def _cell_ids(text: str) -> set[str] | None:
    try:
        cells = json.loads(text).get("cells")
        return {str(c.get("id")) for c in cells}
    except (ValueError, AttributeError, TypeError):
        return None


def _write_client_copy(session: NotebookSession, text: str, state: bytes | None) -> None:
    """The client copy, never replaced by a text rendered from a replica behind it: one whose
    replica only lacks updates is left out (the copy holds all it has). One that also holds
    updates the copy lacks writes at once if it has every cell the copy has (what it lacks is
    within those: outputs another writer will write again); otherwise it waits for its replica
    to catch up and saves again, or, if the missing changes never come, writes and keeps the copy
    beside it."""
    mirror = session.local_path
    assert mirror is not None
    done, held = write_client_copy(mirror, text, state)
    if done is not CopyWrite.DIVERGED:
        return
    assert held is not None
    try:
        had = _cell_ids(mirror.read_text())
    except OSError:
        had = None
    has = _cell_ids(text)
    if had is not None and has is not None and had <= has:
        write_client_copy(mirror, text, state, force=True, keep_earlier=False)
        return
    live, depth = session.live, _CATCHING_UP.get()
    if (
        live is not None
        and depth < _CATCH_UPS
        and live.wait_state(lambda now: state_covers(state_vector(now), held), CATCH_UP_WAIT)
    ):
        token = _CATCHING_UP.set(depth + 1)
        try:
            session.save()  # rendered again, with the updates the copy holds
        finally:
            _CATCHING_UP.reset(token)
        return
    log.warning("the client copy %s holds cells this writer has not received: kept beside it", mirror)
    write_client_copy(mirror, text, state, force=True)


def write_notebook(
    session: NotebookSession, text: str, *, state: bytes | Literal["rendered"] | None = "rendered"
) -> None:
    """The default :data:`NotebookWriter`: ``text`` (rendered from the session's replica of the
    notebook) into the client copy first, replaced atomically so a reader never sees half a
    notebook; then the notebook in the sandbox. With a live document (:attr:`NotebookSession.live`)
    the Jupyter server writes the sandbox's ``.ipynb`` from the document, and this asks it to now;
    without one, ``text`` is written there (through the Jupyter contents API, as a text file, for a
    session without a sandbox object: the same bytes either way).

    The client copy is written whatever happens to the sandbox's (a full disk there): a failure
    to write the sandbox's copy is raised after it, as :class:`~seer.errors.NotebookError`.

    Other writers (sessions, MCP servers) keep the same client copy; ``state`` is the live
    document's state ``text`` was rendered at (default: :func:`rendered_state`), and a text from
    a replica behind the copy never replaces it (:func:`seer.outputs.write_client_copy`)."""
    mirror = session.local_path
    if mirror is not None:
        _write_client_copy(session, text, rendered_state() if state == "rendered" else state)
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

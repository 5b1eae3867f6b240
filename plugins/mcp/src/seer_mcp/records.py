"""Where a notebook MCP server's research record goes: the sandbox a session runs in (from this
machine's records of sandboxes, checked against the session's own Jupyter server), and the
notebook's client-side copy in that sandbox's record folder."""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from seer.errors import SeerError
from seer.notebook import JupyterClient, NotebookSession

if TYPE_CHECKING:
    from seer.sandbox import Sandbox

__all__ = ["place_copy", "sandbox_of", "session_on_record"]


def sandbox_of(session: NotebookSession) -> Sandbox | None:
    """The sandbox whose Jupyter server ``session`` is on, if this machine has its record.

    The kernel says which sandbox it is in (``session.sandbox_id``); that sandbox's recorded
    Jupyter server must be the session's, so a kernel cannot point anywhere else.
    """
    if session.sandbox is not None:
        return session.sandbox
    sandbox_id = session.sandbox_id
    if not sandbox_id:
        return None
    from seer import Sandbox

    try:
        sandbox = Sandbox.attach(sandbox_id)
        url = sandbox.jupyter_url
        if not url:
            return None
        theirs = JupyterClient.from_url(url)
    except (SeerError, OSError, ValueError):
        return None
    ours = session.client
    if (theirs.url, theirs.token) != (ours.url, ours.token):
        return None
    return sandbox


def place_copy(session: NotebookSession, outputs_dir: str | os.PathLike[str] | None) -> None:
    """Give ``session`` its client-side copy: ``<sandbox's record folder>/<name>.ipynb``, or,
    for a sandbox without a record here, ``<SEER_OUTPUTS_DIR or ./seer-outputs>/<server>/``."""
    sandbox = sandbox_of(session)
    if sandbox is not None:
        folder = sandbox.outputs_dir
    else:
        from seer.execution import DEFAULT_OUTPUTS_DIR

        parts = urllib.parse.urlsplit(session.client.url)
        server = re.sub(r"[^A-Za-z0-9_-]", "-", f"jupyter-{parts.hostname}-{parts.port or 80}")
        folder = Path(outputs_dir or DEFAULT_OUTPUTS_DIR).expanduser().absolute() / server
    if session.local_path is None or session.local_path.parent != folder:
        session.local_path = folder / f"{session.name}.ipynb"


def session_on_record(sandbox_id: str, notebook_path: str) -> tuple[str, str] | None:
    """``(session id, jupyter_url)`` of the session for ``notebook_path`` on the Jupyter server
    the record of sandbox ``sandbox_id`` names now, if any."""
    from seer import Sandbox

    try:
        url = Sandbox.attach(sandbox_id).jupyter_url
        if not url:
            return None
        sessions = JupyterClient.from_url(url).sessions()
    except (SeerError, OSError, ValueError):
        return None
    for model in sessions:
        if model.get("path") == notebook_path and model.get("id"):
            return str(model["id"]), url
    return None

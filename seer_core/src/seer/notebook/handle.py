"""What a notebook session is made of: :class:`SessionHandle` holds a session's state (its
Jupyter server, kernel, notebook and the replica of its live document) and answers what needs no
kernel. :class:`~seer.notebook.session.NotebookSession` is built on it, one concept a module:

* :mod:`seer.notebook.replica`: the notebook as held here, kept in sync with its live document,
  and saved (:meth:`~seer.notebook.replica.NotebookReplica.save`);
* :mod:`seer.notebook.order`: where a cell goes when other writers' cells race it to the kernel;
* :mod:`seer.notebook.kernel`: the kernel websocket (connecting, requests, a kernel that died,
  cells an earlier client left running);
* :mod:`seer.notebook.run`: one cell run (``exec``) and its record in the notebook;
* :mod:`seer.notebook.editing`: reading and editing cells, continuing another notebook;
* :mod:`seer.notebook.lifecycle`: models and workspaces set up, restart, reopen, detach, shutdown;
* :mod:`seer.notebook.recovery`: attaching to a session made elsewhere, and ``sync``;
* :mod:`seer.notebook.session`: the session itself and the functions that make one.

Each is a class the next one extends (the chain ends in ``NotebookSession``): a module calls
only what the ones below it define, so the concepts import one another without a cycle.
"""

from __future__ import annotations

import collections
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seer.notebook.client import (
    JupyterClient,
    KernelChannels,
    quote_path,
)
from seer.notebook.document import (
    NotebookDocument,
)
from seer.notebook.live import LiveNotebook
from seer.notebook.results import CellResult, OutputCollector
from seer.notebook.writer import NotebookWriter, write_notebook

if TYPE_CHECKING:
    from seer.sandbox import Sandbox


#: ``model_info_text`` when no models are pre-loaded in the kernel.
NO_MODELS_TEXT = "No models are pre-loaded in this kernel."


#: The cell-metadata key marking a cell that has started but not finished (its request's id).
RUNNING_KEY = "seer_running"


#: The cell-metadata key naming the kernel process a cell's execution count comes from (the
#: kernel's own session id, in every message it sends): counts start again at 1 in a restarted
#: kernel, so a count orders cells only against cells of the same kernel.
KERNEL_KEY = "seer_kernel"


#: The cell-metadata key marking a cell :meth:`~seer.notebook.session.NotebookSession.sync`
#: recovered from the kernel's history (no notebook held it when the handle looked). The writer
#: that ran it may still be putting its own cell into the live document; when both are there (the
#: same source, execution count and kernel), the recovered one goes: see ``NotebookReplica._pull``.
RECOVERED_KEY = "seer_recovered"


@dataclass
class OrphanCell:
    """A cell an earlier client started in this kernel, as far as its messages have arrived."""

    msg_id: str
    collector: OutputCollector
    code: str | None = None
    count: int | None = None
    reply: dict[str, Any] | None = None
    idle: bool = False
    started: float = field(default_factory=time.monotonic)


class SessionHandle:
    """A notebook session's state: its Jupyter server, kernel and notebook (see the module's
    docstring for the classes built on it)."""

    def __init__(
        self,
        client: JupyterClient,
        *,
        session_id: str,
        kernel_id: str,
        notebook_path: str,
        name: str,
        sandbox: Sandbox | None = None,
        mirror_path: Path | None = None,
        cells: list[dict[str, Any]] | None = None,
        metadata: dict[str, Any] | None = None,
        kernel_env_file: str | None = None,
    ):
        self._client = client
        self._kernel_env_file = kernel_env_file
        self.session_id = session_id
        self.kernel_id = kernel_id
        #: the notebook's path, relative to the Jupyter root (the sandbox's working directory)
        self.notebook_path = notebook_path
        self.name = name
        self.sandbox = sandbox
        #: where the notebook is mirrored on this machine (None: not mirrored)
        self.local_path = mirror_path
        self.model_info_text = NO_MODELS_TEXT
        #: what ``setup()`` installed, in order (re-applied by ``restart()``)
        self.workspaces: list[Any] = []
        self.installed: list[Any] = []
        self._preload_models = True
        self._hidden_model_loading = True
        #: what :meth:`save` hands the rendered notebook to: :func:`write_notebook` unless a
        #: plugin installs its own (the notebook MCP server writes from a thread of its own)
        self.writer: NotebookWriter = write_notebook
        self._lock = threading.RLock()
        self._channels: KernelChannels | None = None
        self._dead: str | None = None
        self._closed = False
        self._busy = False
        self._auto_restarted = False
        self._last_model_info: dict[str, Any] | None = None
        self._displays: dict[str, list[dict[str, Any]]] = {}
        #: the running cell's outputs (the collector's list), for ``partial_outputs``
        self._live: list[dict[str, Any]] | None = None
        #: True once the Jupyter server stopped answering (the kernel died with it)
        self._server_gone = False
        #: the kernel's execution state as the server last reported it (None: no kernel)
        self._kernel_state: str | None = None
        #: the kernel websocket's session key (None: a fresh one per connection); see ``attach``
        self._channel_key: str | None = None
        #: cells an earlier client with the same ``_channel_key`` started and did not see finish
        self._orphans: dict[str, OrphanCell] = {}
        self._orphans_done: set[str] = set()
        #: what the kernel ran that this handle recovered into the notebook (see ``attach``)
        self.recovered: list[CellResult] = []
        #: True when ``attach`` found the kernel running a cell (``sync()`` waits for it)
        self.busy_at_attach = False
        #: the sandbox the kernel runs in, as the kernel reports it (``SEER_SANDBOX_ID``)
        self.sandbox_id: str | None = sandbox.sandbox_id if sandbox is not None else None
        #: the notebook's live document (None: the server has none; the file is written instead)
        self._doc: LiveNotebook | None = None
        self._doc_seen = 0
        #: the document's version when this session joined it: above it, another writer wrote
        self._doc_base = 0
        self._doc_metadata: str | None = None
        self._doc_lock = threading.RLock()
        #: the cell this session runs now (its outputs grow here, not from the document)
        self._running_cell: dict[str, Any] | None = None
        #: requests (msg ids) the kernel has started, whoever sent them (seen on its iopub), in
        #: the order it started them, with their execution counts
        self._started: dict[str, int | None] = {}
        #: the execution counts of those (since this kernel last started)
        self._counts_seen: set[int] = set()
        #: the kernel process those counts come from (its session id, from its messages' headers)
        self._kernel_run: str | None = None
        #: the cells this session ran last, placed again as other writers' cells come in
        self._recent: collections.deque[tuple[dict[str, Any], int | None]] = collections.deque(maxlen=64)
        self._placed_at = 0
        #: cells (ids) run again in place here (``run_cell``): their count is not their place
        self._reran: set[str] = set()
        #: whether the notebook held cells ``sync`` recovered when it was last looked through
        self._recovered = False
        self._nb = NotebookDocument(
            metadata
            or {
                "kernelspec": {"display_name": "Python 3 (seer)", "language": "python", "name": "python3"},
                "language_info": {"name": "python"},
            },
            cells,
        )

    @property
    def jupyter_url(self) -> str:
        """The Jupyter server's URL with its token (what ``attach`` and a browser need)."""
        return self._client.jupyter_url

    @property
    def client(self) -> JupyterClient:
        """The REST client for the session's Jupyter server."""
        return self._client

    @property
    def live(self) -> LiveNotebook | None:
        """The notebook's live document on the Jupyter server (jupyter-collaboration), which
        every writer edits and the server saves to the ``.ipynb``; None where the server has
        none (then this session writes the file itself)."""
        return self._doc

    @property
    def notebook_url(self) -> str:
        """The notebook in JupyterLab, with the server's token: open it in a browser to watch
        (and edit) the notebook live."""
        return (
            f"{self._client.url}/lab/tree/{quote_path(self.notebook_path)}"
            f"?token={urllib.parse.quote(self._client.token)}"
        )

    @property
    def alive(self) -> bool:
        """False once the kernel died (until ``restart()``) or the session was shut down."""
        return not self._closed and self._dead is None

    def __repr__(self) -> str:
        return f"<NotebookSession {self.session_id} kernel={self.kernel_id} notebook={self.notebook_path!r}>"

    @property
    def server_died(self) -> bool:
        """True once the Jupyter server stopped answering (its kernels died with it): ``restart()``
        cannot help; :func:`seer.execution.restart_jupyter` and :meth:`reopen` can."""
        return self._server_gone

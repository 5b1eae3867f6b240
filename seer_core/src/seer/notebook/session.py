"""Notebook sessions: a Jupyter kernel in the sandbox, driven over HTTP and the kernel websocket.

A :class:`NotebookSession` is one Jupyter *session* (``POST /api/sessions``) on the server the
``notebook`` execution mode started in the sandbox: a kernel plus the notebook it writes. It talks
to the server only through its REST API and the kernel channels websocket
(``/api/kernels/<id>/channels``), never ZMQ, so it works through whatever tunnel a provider uses
to expose the server's port.

Every visible cell and its outputs land in a real ``.ipynb`` (nbformat 4.5) in the sandbox,
rewritten after each cell, and in a local mirror. Hidden cells (``exec(..., hidden=True)``, the
model-loading and workspace set-up cells) run with ``store_history=False`` and are written
nowhere: they are not in ``In``, ``_ih``, the IPython history or the notebook.

Build one with :func:`create_notebook_session` (also importable from :mod:`seer.execution`).
"""

from __future__ import annotations

import collections
import contextlib
import json
import operator
import os
import posixpath
import queue
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from seer.errors import (
    CellExecutionError,
    CellTimeoutError,
    ConfigError,
    JupyterServerDiedError,
    KernelDiedError,
    NotebookError,
)
from seer.notebook.client import (
    CONNECT_TIMEOUT,
    NOTEBOOK_PURPOSE,
    ChannelClosed,
    JupyterClient,
    KernelChannels,
    KernelRestarted,
    quote_path,
)
from seer.notebook.document import (
    NotebookDocument,
    check_notebook_path,
    check_source,
    new_cell_id,
    notebook_cells,
    source_text,
)
from seer.notebook.live import LiveNotebook, live_supported
from seer.notebook.results import MODEL_INFO_MIME, CellResult, OutputCollector

if TYPE_CHECKING:
    from seer.sandbox import Sandbox

__all__ = [
    "NOTEBOOK_DIR",
    "NO_MODELS_TEXT",
    "NotebookSession",
    "NotebookWriter",
    "create_notebook_session",
    "open_notebook_session",
    "unique_notebook_path",
    "write_notebook",
]

#: ``model_info_text`` when no models are pre-loaded in the kernel.
NO_MODELS_TEXT = "No models are pre-loaded in this kernel."
#: How long to wait for a kernel to answer an interrupt before giving up on a timed-out cell.
INTERRUPT_GRACE = 10.0
#: With no message for this long while a cell runs, ask the server whether the kernel lives.
LIVENESS_INTERVAL = 10.0
#: Pause before connecting again to a kernel whose websocket the server dropped while it started.
CONNECT_RETRY_PAUSE = 1.0
#: How often ``restart()`` sets a fresh kernel up again when the connection drops during setup.
RESTART_SETUP_ATTEMPTS = 3
#: While a fresh kernel's output stream is not yet heard, ask it for its info this often (seconds).
IOPUB_NUDGE_INTERVAL = 0.5
#: While a cell runs, its outputs so far are saved at most this often (seconds), so a client that
#: dies mid-cell leaves them in the notebook.
PARTIAL_SAVE_INTERVAL = 2.0
#: The cell-metadata key marking a cell that has started but not finished (its request's id).
RUNNING_KEY = "seer_running"
#: The cell-metadata key naming the kernel process a cell's execution count comes from (the
#: kernel's own session id, in every message it sends): counts start again at 1 in a restarted
#: kernel, so a count orders cells only against cells of the same kernel.
KERNEL_KEY = "seer_kernel"


@dataclass
class _Orphan:
    """A cell an earlier client started in this kernel, as far as its messages have arrived."""

    msg_id: str
    collector: OutputCollector
    code: str | None = None
    count: int | None = None
    reply: dict[str, Any] | None = None
    idle: bool = False
    started: float = field(default_factory=time.monotonic)


# --- the session ----------------------------------------------------------------------------


_LOAD_MODELS = '''\
def __seer_load_models():
    """Load the models configured for this sandbox into the kernel (seer)."""
    import json, os
    from IPython.display import display
    path = os.environ.get("SEER_MODELS_MANIFEST")
    info = None
    if path and os.path.isfile(path):
        with open(path) as fh:
            entries = json.load(fh).get("models", [])
        if entries:
            from seer.runtime.loading import describe, load_model, warn_on_reload
            namespace = globals()
            loaded = {}
            for entry in entries:
                model, tokenizer = load_model(entry)
                name = entry["var_name"]
                namespace[name] = model
                namespace["tokenizer" if name == "model" else name + "_tokenizer"] = tokenizer
                loaded[name] = (model, tokenizer, entry)
            info = describe(loaded)
            warn_on_reload(loaded)
    globals()["__seer_model_info__"] = info
    display({"MODEL_INFO_MIME": {"text": info}}, raw=True)
try:
    __seer_load_models()
finally:
    del __seer_load_models
'''.replace("MODEL_INFO_MIME", MODEL_INFO_MIME)


#: Gives the kernel the sandbox's variables set after the Jupyter server started. The file is the
#: session's, else the one the server names in ``SEER_KERNEL_ENV`` (a session attached by URL, or
#: a kernel the server restarted with the environment it first had).
_APPLY_ENV = """\
def __seer_apply_env(path):
    import json, os
    path = path or os.environ.get("SEER_KERNEL_ENV")
    if not path:
        return
    try:
        with open(path) as fh:
            os.environ.update(json.load(fh))
    except (OSError, ValueError):
        pass
try:
    __seer_apply_env(ENV_FILE)
finally:
    del __seer_apply_env
"""

#: What a handle attaching to a kernel asks it: the models it holds, its sandbox, and its history
#: (the raw source of every cell run with history, by execution count; which ones have a value).
_KERNEL_STATE = """\
def __seer_kernel_state():
    import json, os
    ip = get_ipython()
    hist = ip.history_manager
    print(json.dumps({
        "model_info": globals().get("__seer_model_info__") or "",
        "sandbox_id": os.environ.get("SEER_SANDBOX_ID") or "",
        "inputs": list(hist.input_hist_raw),
        "values": sorted(n for n in hist.output_hist if isinstance(n, int)),
    }))
try:
    __seer_kernel_state()
finally:
    del __seer_kernel_state
"""

#: The display data (mime bundle) of the values of the cells numbered NUMBERS.
_KERNEL_VALUES = """\
def __seer_kernel_values(numbers):
    import json
    ip = get_ipython()
    out = {}
    for n in numbers:
        if n in ip.history_manager.output_hist:
            data, _ = ip.display_formatter.format(ip.history_manager.output_hist[n])
            out[n] = {k: v for k, v in data.items() if isinstance(v, str)}
    print(json.dumps(out))
try:
    __seer_kernel_values(NUMBERS)
finally:
    del __seer_kernel_values
"""


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


class NotebookSession:
    """A Jupyter session in the sandbox: a kernel (with the models loaded) and its notebook.

    ``exec`` runs one cell at a time (a lock serialises callers); ``interrupt`` may be called from
    any thread. Use it as a context manager, or call ``shutdown()`` when done.
    """

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
        #: the kernel websocket's session key (None: a fresh one per connection); see ``attach``
        self._channel_key: str | None = None
        #: cells an earlier client with the same ``_channel_key`` started and did not see finish
        self._orphans: dict[str, _Orphan] = {}
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
        self._nb = NotebookDocument(
            metadata
            or {
                "kernelspec": {"display_name": "Python 3 (seer)", "language": "python", "name": "python3"},
                "language_info": {"name": "python"},
            },
            cells,
        )

    # --- properties -----------------------------------------------------------------------
    @property
    def jupyter_url(self) -> str:
        """The Jupyter server's URL with its token (what ``attach`` and a browser need)."""
        return self._client.jupyter_url

    @property
    def client(self) -> JupyterClient:
        """The REST client for the session's Jupyter server."""
        return self._client

    @property
    def mcp_config(self) -> dict[str, Any]:
        """An MCP server entry for this session, to put as it is in an agent's MCP settings
        (``mcp_servers = {"notebooks": session.mcp_config}``): seer's notebook MCP server on stdio,
        with this session as its default (``SEER_SESSION_ID``, ``SEER_JUPYTER_URL``) and the
        folder the sandboxes' research records go to (``SEER_OUTPUTS_DIR``, absolute): the server
        keeps the notebook's client-side copy in ``<that>/<sandbox_id>/<name>.ipynb``, where this
        session keeps it.

        The config holds a credential: the Jupyter URL carries the server's token. Hand it only to
        the agent that may use the session; do not log or commit it. Needs seer's MCP plugin
        (``pip install "seer[mcp]"``); raises :class:`~seer.errors.PluginError` without it.
        """
        import importlib.util
        import sys

        from seer.errors import PluginError

        if importlib.util.find_spec("seer_mcp") is None:
            raise PluginError(
                "session.mcp_config needs seer's MCP plugin (the seer-mcp package); "
                'install it with: pip install "seer[mcp]"'
            )
        from seer.state import seer_home

        env = {
            "SEER_SESSION_ID": self.session_id,
            "SEER_JUPYTER_URL": self.jupyter_url,
            # Where the sandbox's record is (an MCP client passes the server only this env): the
            # server finds the sandbox's client folder there, and the session again after the
            # sandbox's Jupyter server was started again (by the notebook's path).
            "SEER_HOME": str(seer_home()),
            "SEER_NOTEBOOK_PATH": self.notebook_path,
        }
        if self.sandbox_id:
            env["SEER_SANDBOX_ID"] = self.sandbox_id
        if self.sandbox is not None:
            env["SEER_OUTPUTS_DIR"] = str(self.sandbox.outputs_dir.parent)
        elif self.local_path is not None:
            env["SEER_OUTPUTS_DIR"] = str(self.local_path.absolute().parent.parent)
        if self.model_info_text != NO_MODELS_TEXT:  # for the server's instructions to the agent
            env["SEER_SESSION_MODELS"] = self.model_info_text[:4000]
        for name in ("SEER_LOAD_PLUGINS", "SEER_DISABLE_PLUGINS"):
            if os.environ.get(name):
                env[name] = os.environ[name]
        return {"type": "stdio", "command": sys.executable, "args": ["-m", "seer_mcp.notebook"], "env": env}

    @property
    def cells(self) -> list[dict[str, Any]]:
        """The notebook's cells so far (nbformat dicts), every writer's: with a live document,
        what others (another session, an MCP server, a person in JupyterLab) put there too."""
        self._pull()
        return self._nb.cells

    @property
    def notebook(self) -> dict[str, Any]:
        """The notebook as an nbformat 4.5 dict."""
        self._pull()
        with self._doc_lock:
            return json.loads(self._nb.render())

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

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until the notebook in the sandbox holds everything this session wrote: with a
        live document the Jupyter server saves it shortly after each cell (:attr:`live`); this
        has it save now and waits. Raises :class:`~seer.errors.NotebookError` when the server
        could not write it (the client copy is written regardless). ``sandbox.terminate()``
        flushes every notebook itself before it copies them."""
        doc = self._doc
        if doc is None:
            return
        with self._doc_lock:
            self._push()
        doc.round_trip(timeout)  # what every other writer put there is here too now
        with self._lock:
            with contextlib.suppress(NotebookError):
                if self._channels is not None and not self._channels.closed:
                    self._drain()  # which cells the kernel started meanwhile
            self._placed_at = -1
            self._place_recent(len(self._recent))
        self.save()  # the client copy, from this replica
        doc.flush(timeout)

    def wait_changed(self, timeout: float) -> bool:
        """Whether another writer changes the live document within ``timeout`` seconds (at once
        True if one did since this session last read it). False without a live document."""
        doc = self._doc
        if doc is None:
            return False
        return doc.version != self._doc_seen or doc.wait_changed(self._doc_seen, timeout)

    # --- the live document ----------------------------------------------------------------
    def _connect_document(self, *, new: bool) -> None:
        """Join the notebook's live document, if the server has one. ``new``: this session made
        the notebook: what the server put in it (JupyterLab's blank first cell) goes, and the
        cells here are the notebook; otherwise the document's cells replace the ones here."""
        self._close_document()
        if not live_supported():
            return
        try:
            doc = LiveNotebook(self._client, self.notebook_path)
        except NotebookError as exc:
            if "no live document" not in str(exc):
                raise
            return  # a server without jupyter-collaboration: the session writes the file
        with self._doc_lock:
            self._doc = doc
            self._doc_seen = doc.version
            cells, metadata = doc.pull()
            cells = json.loads(json.dumps(cells))  # this session's own, to change
            self._doc_metadata = None
            if new:
                doc.push(self._nb.cells, None)
                self._nb.take_changes()
            else:
                self._nb.replace(cells)
                self._nb.take_changes()
                self._nb.metadata.update(metadata)
            self._push()

    def _write_file(self) -> None:
        """Write the notebook as held here into the sandbox's file now, through the Jupyter
        contents API (not the writer, which may write later): a live document is made from it."""
        self._client.call(
            "PUT",
            f"/api/contents/{quote_path(self.notebook_path)}",
            {"type": "file", "format": "text", "content": self._nb.render()},
        )

    def _close_document(self, *, save: bool = False) -> None:
        doc = self._doc
        if doc is None:
            return
        if save:
            with contextlib.suppress(NotebookError, OSError):
                self.flush()
        self._doc = None
        doc.close()

    def _push(self) -> None:
        """Put what changed here into the live document."""
        doc = self._doc
        if doc is None:
            return
        with self._doc_lock:
            changes = self._nb.take_changes()
            if changes is None or changes:
                doc.push(self._nb.cells, changes)
            metadata = json.dumps(self._nb.metadata, sort_keys=True)
            if metadata != self._doc_metadata:
                doc.push_metadata(self._nb.metadata)
                self._doc_metadata = metadata

    def _pull(self) -> None:
        """Bring the cells here up to date with the live document, if another writer changed it.
        Cell dicts keep their identity (by id); the cell running here keeps its own."""
        doc = self._doc
        if doc is None or doc.version == self._doc_seen:
            return
        with self._doc_lock:
            self._push()
            seen = doc.version
            cells, _ = doc.pull()
            held = {str(c.get("id")): c for c in self._nb.cells}
            merged = []
            for cell in cells:
                cid = str(cell.get("id"))
                old = held.get(cid)
                if old is None:
                    merged.append(json.loads(json.dumps(cell)) if cid not in doc.pulled else cell)
                    continue
                if cid in doc.pulled and old is not self._running_cell and old != cell:
                    old.clear()
                    old.update(cell)
                merged.append(old)
            unchanged = {str(c.get("id")) for c in merged} - doc.pulled
            if self._running_cell is not None:
                unchanged.discard(str(self._running_cell.get("id")))
            self._nb.replace(merged, unchanged=unchanged)
            self._doc_seen = seen

    @property
    def alive(self) -> bool:
        """False once the kernel died (until ``restart()``) or the session was shut down."""
        return not self._closed and self._dead is None

    def __repr__(self) -> str:
        return f"<NotebookSession {self.session_id} kernel={self.kernel_id} notebook={self.notebook_path!r}>"

    def __enter__(self) -> NotebookSession:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    # --- connecting -----------------------------------------------------------------------
    def _connect(self, *, fresh: bool = False) -> None:
        """Open the kernel websocket and ask the kernel for its info, within ``CONNECT_TIMEOUT``.

        A kernel still starting (its imports for the models take minutes on a loaded machine)
        may not answer before the Jupyter server gives up waiting for it (``kernel_info_timeout``)
        and drops the websocket: while the kernel lives, connect again until the deadline. A
        kernel that is gone or dead, or a deadline spent, raises :class:`NotebookError` saying so.

        ``fresh``: the kernel was just started (or restarted) for this session and runs nothing,
        so it can be asked on shell: the connection is made only once its output stream is heard
        (see :meth:`_await_iopub`).
        """
        deadline = time.monotonic() + CONNECT_TIMEOUT
        attempts = 0
        while True:
            attempts += 1
            if self._channels is not None:
                self._channels.close()
                self._channels = None
            reply: dict[str, Any] | None = None
            try:
                remaining = max(deadline - time.monotonic(), 1.0)
                self._channels = KernelChannels(
                    self._client, self.kernel_id, session=self._channel_key, timeout=remaining
                )
                # On the control channel: a kernel busy with a cell (one an earlier client left
                # running) answers there at once, not after the cell.
                remaining = max(deadline - time.monotonic(), 0.001)
                reply = self._request("kernel_info_request", {}, timeout=remaining, channel="control")
                if fresh:
                    self._await_iopub(deadline)
                break
            except NotebookError as exc:
                lost = self._channels is None or self._channels.closed
                if not lost and time.monotonic() >= deadline:
                    if reply is not None:  # it answered; exc says what else did not come in time
                        raise
                    raise NotebookError(
                        f"kernel {self.kernel_id} did not answer within {CONNECT_TIMEOUT:g}s ({exc})"
                    ) from exc
                # The websocket could not be opened, or was dropped: is the kernel still there?
                model = self._kernel_model()
                state = None if model is None else model.get("execution_state")
                if model is None or state == "dead":
                    gone = "is gone" if model is None else "died"
                    raise NotebookError(f"kernel {self.kernel_id} {gone} while connecting ({exc})") from exc
                if time.monotonic() + CONNECT_RETRY_PAUSE >= deadline:
                    raise NotebookError(
                        f"could not connect to kernel {self.kernel_id} within {CONNECT_TIMEOUT:g}s: "
                        f"the Jupyter server dropped its websocket {attempts} times while the kernel "
                        f"was {state!r} (last: {exc})"
                    ) from exc
                time.sleep(CONNECT_RETRY_PAUSE)
        info = reply.get("language_info")
        if info:
            self._nb.metadata["language_info"] = info

    def _await_iopub(self, deadline: float) -> None:
        """Return once the kernel's output stream (iopub) reaches this websocket.

        A kernel the server has just restarted, on new ports, can answer on shell and control
        while the server's subscription to its iopub is not yet in place (ZMQ subscribes in the
        background, and the server skips its own check when it still takes the kernel for busy
        with the cell that killed it). A cell run then gets its reply but never its outputs or
        its idle status. So ask for kernel_info on shell, every ``IOPUB_NUDGE_INTERVAL``, until
        the status of one of those requests comes back on iopub; only for a kernel that runs
        nothing (a shell request would wait behind a running cell).
        """
        channels = self._channels
        assert channels is not None
        asked: set[str] = set()
        next_ask = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise NotebookError(
                    f"kernel {self.kernel_id} answers, but its output stream (iopub) did not reach "
                    f"this client within {CONNECT_TIMEOUT:g}s"
                )
            if now >= next_ask:
                msg = channels.message("kernel_info_request", {})
                channels.send(msg)
                asked.add(msg["header"]["msg_id"])
                next_ask = now + IOPUB_NUDGE_INTERVAL
            item = channels.get(max(min(next_ask, deadline) - now, 0.0))
            if item is None:
                continue
            if isinstance(item, ChannelClosed):
                raise NotebookError(f"the kernel websocket closed: {item.reason}")
            if isinstance(item, dict) and (item.get("parent_header") or {}).get("msg_id") in asked:
                if item.get("channel") == "iopub":
                    return
                continue  # a reply to one of these requests, on shell
            self._absorb(item)

    def _request(
        self, msg_type: str, content: dict[str, Any], *, timeout: float, channel: str = "shell"
    ) -> dict[str, Any]:
        """Send a request (shell or control) and wait for its reply's content."""
        channels = self._channels
        assert channels is not None
        msg = channels.message(msg_type, content, channel)
        channels.send(msg)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise NotebookError(f"the kernel did not answer a {msg_type} within {timeout:g}s")
            item = channels.get(remaining)
            if isinstance(item, ChannelClosed):
                raise NotebookError(f"the kernel websocket closed: {item.reason}")
            if (
                isinstance(item, dict)
                and item.get("channel") == channel
                and item.get("parent_header", {}).get("msg_id") == msg["header"]["msg_id"]
            ):
                content_: dict[str, Any] = item["content"]
                return content_
            self._absorb(item)

    # --- cells an earlier client started --------------------------------------------------
    def _absorb(self, item: Any) -> None:
        """Keep a message about a cell an earlier client with this handle's channel key started
        (the server replays what the kernel sent while no client was connected, and sends the
        rest live): the cell's outputs are recorded in its notebook cell when it finishes."""
        if not isinstance(item, dict):
            return
        parent = item.get("parent_header") or {}
        if item.get("msg_type") == "execute_input" and parent.get("msg_id"):
            self._note_started(
                str(parent["msg_id"]),
                (item.get("content") or {}).get("execution_count"),
                (item.get("header") or {}).get("session"),
            )
        key = self._channel_key
        if key is None:
            return
        if parent.get("session") != key or parent.get("msg_type") != "execute_request":
            return
        msg_id = parent.get("msg_id")
        if not msg_id or msg_id in self._orphans_done:
            return
        orphan = self._orphans.get(msg_id)
        if orphan is None:
            orphan = self._orphans[msg_id] = _Orphan(msg_id, OutputCollector(self._displays))
        msg_type = item.get("msg_type") or item.get("header", {}).get("msg_type")
        content = item.get("content") or {}
        if item.get("channel") == "shell":
            orphan.reply = content
        elif msg_type == "execute_input":
            orphan.code = content.get("code")
            orphan.count = content.get("execution_count")
        elif msg_type == "status":
            if content.get("execution_state") == "idle":
                orphan.idle = True
        elif item.get("channel") == "iopub":
            orphan.collector.handle(msg_type, content)
        if orphan.idle:
            self._fold(orphan)

    def _fold(self, orphan: _Orphan) -> None:
        """An earlier client's cell finished: its notebook cell gets all its outputs."""
        self._orphans.pop(orphan.msg_id, None)
        self._orphans_done.add(orphan.msg_id)
        cell = next(
            (c for c in self._nb.cells if c.get("metadata", {}).get(RUNNING_KEY) == orphan.msg_id), None
        )
        code = orphan.code if orphan.code is not None else (source_text(cell["source"]) if cell else "")
        # The count comes from the replayed execute_input, else the reply, else what the client
        # that started the cell saved (it saw the execute_input before it went).
        count = next(
            (
                n
                for n in (
                    orphan.count,
                    (orphan.reply or {}).get("execution_count"),
                    cell.get("execution_count") if cell else None,
                )
                if n is not None
            ),
            None,
        )
        if cell is None:
            cell = {
                "cell_type": "code",
                "execution_count": None,
                "id": new_cell_id(),
                "metadata": {},
                "outputs": [],
                "source": code,
            }
            self._nb.add(cell)
        # What the earlier client saw (and saved) came before what was replayed: one stream.
        merged = OutputCollector(self._displays)
        merged.outputs = [dict(o) for o in cell.get("outputs") or []]
        for out in orphan.collector.outputs:
            merged.append(dict(out))
        merged.error = orphan.collector.error
        if orphan.reply is not None:
            merged.error_from_reply(orphan.reply)
        result = merged.result(code, hidden=False, execution_count=count, started=orphan.started)
        cell["metadata"].pop(RUNNING_KEY, None)
        cell["execution_count"] = count
        self._stamp(cell)
        cell["outputs"] = result.outputs
        self._nb.touch(cell)
        self.recovered.append(result)
        with contextlib.suppress(Exception):
            self.save()

    @property
    def orphans_running(self) -> bool:
        """True while a cell an earlier client started (see ``attach``) has not finished."""
        return bool(self._orphans)

    # --- running code ---------------------------------------------------------------------
    def exec(self, code: str, hidden: bool = False, timeout: float | None = None) -> CellResult:
        """Run ``code`` as a cell and return what it produced.

        A visible cell is appended (with its outputs) to the notebook in the sandbox and its local
        mirror; ``hidden=True`` runs it without history and records it nowhere. An exception in the
        cell is *returned* (``result.error``), not raised. Raises
        :class:`~seer.errors.CellTimeoutError` after ``timeout`` seconds (having interrupted the
        cell) and :class:`~seer.errors.KernelDiedError` if the kernel dies.
        """
        with self._lock:
            return self._run(code, hidden=hidden, timeout=timeout, record=not hidden)

    def exec_file(
        self, path: str | os.PathLike[str], hidden: bool = False, timeout: float | None = None
    ) -> CellResult:
        """Run a local Python file's contents as one cell."""
        return self.exec(Path(path).read_text(), hidden=hidden, timeout=timeout)

    def add_markdown(self, text: str) -> None:
        """Append a markdown cell to the notebook."""
        with self._lock:
            self._nb.add({"cell_type": "markdown", "id": new_cell_id(), "metadata": {}, "source": text})
            self.save()

    # --- reading and editing the notebook -------------------------------------------------
    # Edits take the session's lock, so they wait for a running cell; reads do not.
    def cell(self, index: int) -> dict[str, Any]:
        """A copy of the notebook's cell ``index`` (0-based): an nbformat dict with ``cell_type``,
        ``source`` and, for a code cell, ``outputs`` and ``execution_count``. Does not wait for a
        running cell. Raises :class:`~seer.errors.NotebookError` for an index out of range."""
        self._pull()
        index = self._index(index)
        for _ in range(5):  # a cell's outputs may change under us while a cell runs: copy again
            with contextlib.suppress(RuntimeError):
                copied: dict[str, Any] = json.loads(json.dumps(self._nb.cells[index]))
                return copied
        raise NotebookError(f"cell {index} kept changing while it was read; try again")

    def insert_cell(self, index: int, source: str, cell_type: str = "code") -> None:
        """Put a new cell at ``index`` (``len(session.cells)`` appends), moving the cells from
        ``index`` on down by one. A code cell is not run (``run_cell(index)`` runs it)."""
        if cell_type not in ("code", "markdown", "raw"):
            raise NotebookError(f"cell_type {cell_type!r} is not one of 'code', 'markdown', 'raw'")
        check_source(source)
        cell: dict[str, Any] = {"cell_type": cell_type, "id": new_cell_id(), "metadata": {}, "source": source}
        if cell_type == "code":
            cell.update(outputs=[], execution_count=None)
        with self._lock:
            self._pull()
            self._nb.cells.insert(self._index(index, insert=True), cell)
            self._changed(cell)

    def delete_cell(self, index: int) -> dict[str, Any]:
        """Remove cell ``index`` from the notebook and return it; the cells after it move up."""
        with self._lock:
            self._pull()
            removed = self._nb.cells.pop(self._index(index))
            self._changed()
        return removed

    def move_cell(self, index: int, to: int) -> None:
        """Move cell ``index`` so that it ends up at index ``to``; the cells between shift by one."""
        with self._lock:
            self._pull()
            index = self._index(index)
            to = self._index(to, what="target index")
            moved = self._nb.cells.pop(index)
            self._nb.cells.insert(to, moved)
            self._nb.mark_order()
            self._changed(moved)

    def set_source(self, index: int, source: str) -> None:
        """Replace cell ``index``'s source without running it. A code cell's outputs and execution
        count are cleared: they came from the old source (``run_cell(index)`` makes new ones)."""
        check_source(source)
        with self._lock:
            self._pull()
            cell = self._nb.cells[self._index(index)]
            cell["source"] = source
            if cell.get("cell_type") == "code":
                cell.update(outputs=[], execution_count=None)
            self._changed(cell)

    def clear_outputs(self, index: int | None = None) -> None:
        """Clear code cell ``index``'s outputs and execution count; every code cell's when ``index``
        is None. Sources and the kernel's state stay."""
        with self._lock:
            self._pull()
            cells = self._nb.cells if index is None else [self._nb.cells[self._index(index)]]
            for cell in cells:
                if cell.get("cell_type") == "code":
                    cell.update(outputs=[], execution_count=None)
            self._changed(*cells)

    def run_cell(self, index: int, *, source: str | None = None, timeout: float | None = None) -> CellResult:
        """Run code cell ``index`` again (with ``source`` as its new source, if given) and return
        what it produced, as :meth:`exec` does; the new outputs and execution count replace the
        cell's own, where it is (same index, same id), instead of being appended."""
        with self._lock:
            self._pull()
            index = self._index(index)
            cell = self._nb.cells[index]
            if cell.get("cell_type") != "code":
                raise NotebookError(
                    f"cell {index} is a {cell.get('cell_type')} cell: only code cells run "
                    "(set_source changes its text)"
                )
            if source is not None:
                cell["source"] = check_source(source)
            code = source_text(cell["source"])
            before = len(self._nb.cells)
            try:
                return self._run(code, hidden=False, timeout=timeout, record=True)
            finally:
                # The run recorded the cell at the end (also when it timed out or the kernel died):
                # put it in the place of the cell it re-ran.
                if len(self._nb.cells) > before:
                    with self._doc_lock:
                        new = self._nb.cells.pop()
                        # the run added it to the document: it goes, and the cell it re-ran changes
                        self._push()
                        index = next((i for i, c in enumerate(self._nb.cells) if c is cell), index)
                        cell.update(
                            execution_count=new.get("execution_count"), outputs=new.get("outputs", [])
                        )
                        cell.setdefault("metadata", {}).pop(RUNNING_KEY, None)
                        self._reran.add(str(cell.get("id")))
                        self._changed(cell)

    def open(self, path: str, *, notebook: dict[str, Any] | None = None) -> None:
        """Make notebook ``path`` (on the Jupyter server, relative to its root) this session's
        notebook, to continue it: its cells are read back, with their outputs, and later cells are
        added to it. The kernel is not touched: it keeps its variables and has run none of the
        opened cells (``run_cell`` runs one). The notebook written so far stays as it is.

        With ``notebook`` (an nbformat 4 dict, e.g. a ``.ipynb`` on this machine read with
        ``json.load``), that notebook is written to ``path`` first, which must not exist yet.
        Refused when another session on the server writes ``path``.
        """
        path = check_notebook_path(path)
        with self._lock:
            owner = self._client.notebook_session(path)
            if owner is not None and owner != self.session_id:
                raise NotebookError(
                    f"{path!r} is the notebook of session {owner} on this server; continue it in that "
                    "session, or shut that session down first"
                )
            if notebook is not None:
                if self._client.path_exists(path):
                    raise NotebookError(f"{path!r} already exists on the Jupyter server: open it as it is")
                cells, metadata = notebook_cells(notebook, where="the notebook given")
            else:
                cells, metadata = notebook_cells(self._client.read_notebook(path), where=path)
            self._close_document(save=True)
            name = posixpath.splitext(posixpath.basename(path))[0]
            self._client.call("PATCH", f"/api/sessions/{self.session_id}", {"path": path, "name": name})
            self.notebook_path, self.name = path, name
            if self.local_path is not None:
                self.local_path = self.local_path.with_name(f"{name}.ipynb")
            for key in ("kernelspec", "language_info"):
                if key not in metadata and key in self._nb.metadata:
                    metadata[key] = self._nb.metadata[key]
            self._nb = NotebookDocument(metadata, cells)
            self._displays.clear()
            if notebook is not None:
                self._write_file()  # the document is made from it
            self._connect_document(new=notebook is not None)
            self.save()

    def _index(self, index: object, *, what: str = "cell index", insert: bool = False) -> int:
        """``index`` if it names a cell (with ``insert``: a place between cells, the end included);
        else an error saying what is wrong and what the notebook holds."""
        try:
            if isinstance(index, bool):
                raise TypeError
            index = operator.index(index)  # type: ignore[arg-type]
        except TypeError:
            raise NotebookError(f"{what} {index!r} is not an integer (cells count from 0)") from None
        count = len(self._nb.cells)
        top = count if insert else count - 1
        if 0 <= index <= top:
            return index
        has = f"{self.notebook_path} has {count} cell{'' if count == 1 else 's'}"
        if top < 0:
            valid = "there is no cell to name"
        elif insert:
            valid = f"a new cell goes at 0 to {top}; {top} appends"
        else:
            valid = f"indexes 0 to {top}"
        why = "is negative (cells count from 0)" if index < 0 else "is out of range"
        raise NotebookError(f"{what} {index} {why}: {has} ({valid})")

    def _changed(self, *cells: dict[str, Any]) -> None:
        """(Under the lock.) The notebook's cells were edited (``cells`` changed; cells added,
        deleted or moved tell themselves): render them again and save."""
        for cell in cells:
            self._nb.mark(cell)
        if not cells:
            self._nb.mark_order()
        self._nb.invalidate()
        self.save()

    def interrupt(self) -> None:
        """Interrupt the running cell (it ends with ``KeyboardInterrupt``). Safe from any thread."""
        self._client.call("POST", f"/api/kernels/{self.kernel_id}/interrupt")

    def _check_usable(self) -> None:
        if self._closed:
            raise NotebookError(f"notebook session {self.session_id} is shut down")
        if self._dead is not None and self._server_gone:
            raise JupyterServerDiedError(
                f"{self._dead}; start the server again (seer.execution.restart_jupyter(sandbox)), "
                "then session.reopen(sandbox)"
            )
        if self._dead is not None:
            raise KernelDiedError(f"{self._dead}; call session.restart() to start it again")

    def _drain(self) -> None:
        """Drop what arrived between cells, noticing a kernel that died or restarted meanwhile."""
        channels = self._channels
        assert channels is not None
        while True:
            try:
                item = channels.inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, ChannelClosed):
                self._reconnect_or_die(item.reason)
                return
            if isinstance(item, dict) and not item.get("parent_header"):
                state = item.get("content", {}).get("execution_state")
                if item.get("msg_type") == "status" and state in ("restarting", "dead"):
                    self._auto_restarted = state == "restarting"
                    self._dead = "the kernel died between cells"
                    self._check_usable()
            self._absorb(item)

    def _reconnect_or_die(self, reason: str) -> None:
        model = self._kernel_model()
        if model is None or model.get("execution_state") == "dead":
            self._dead = self._why_gone(f"the kernel is gone ({reason})")
            self._check_usable()
        self._connect()

    def _kernel_model(self) -> dict[str, Any] | None:
        try:
            return self._client.kernel(self.kernel_id)
        except (NotebookError, OSError):
            return None

    def _run(self, code: str, *, hidden: bool, timeout: float | None, record: bool) -> CellResult:
        self._check_usable()
        if self._channels is None or self._channels.closed:
            self._reconnect_or_die("the websocket was closed")
        self._drain()
        channels = self._channels
        assert channels is not None
        msg = channels.message(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": not hidden,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )
        msg_id = msg["header"]["msg_id"]
        collector = OutputCollector(self._displays)
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        interrupted_at: float | None = None
        reply: dict[str, Any] | None = None
        idle = False
        last_seen = started
        reconnects = 0
        # A recorded cell is in the notebook before it runs (as Jupyter does), its outputs list
        # the very list the collector fills: a client that dies mid-cell leaves it there.
        cell = self._begin_record(code, msg_id, collector.outputs) if record else None
        self._running_cell = cell
        last_save, unsaved = started, False
        self._live = collector.outputs
        self._busy = True
        try:
            channels.send(msg)
            while reply is None or not idle:
                now = time.monotonic()
                if unsaved and now - last_save >= PARTIAL_SAVE_INTERVAL:
                    # The outputs so far, into the notebook (the cell may run for hours).
                    assert cell is not None
                    last_save, unsaved = now, False
                    self._nb.touch(cell)
                    self.save()
                wait = LIVENESS_INTERVAL
                if interrupted_at is not None:
                    wait = min(wait, max(interrupted_at + INTERRUPT_GRACE - now, 0.0))
                elif deadline is not None:
                    wait = min(wait, max(deadline - now, 0.0))
                if unsaved:
                    wait = min(wait, max(last_save + PARTIAL_SAVE_INTERVAL - now, 0.01))
                item = channels.get(wait) if wait > 0 else None
                now = time.monotonic()
                if item is None:
                    if deadline is not None and now >= deadline and interrupted_at is None:
                        interrupted_at = now
                        with contextlib.suppress(NotebookError):
                            self.interrupt()
                        continue
                    if interrupted_at is not None and now >= interrupted_at + INTERRUPT_GRACE:
                        partial = collector.result(code, hidden=hidden, execution_count=None, started=started)
                        raise CellTimeoutError(
                            f"the cell ran past its timeout of {timeout:g}s and did not stop when "
                            "interrupted; the kernel is still busy (session.restart() resets it)",
                            result=partial,
                        )
                    if now - last_seen >= LIVENESS_INTERVAL:
                        last_seen = now
                        model = self._kernel_model()
                        if model is None or model.get("execution_state") == "dead":
                            self._died(
                                collector, code, hidden, started, cell, self._why_gone("the kernel died")
                            )
                        if reconnects and model.get("execution_state") == "idle":
                            raise NotebookError(
                                "lost the connection to the kernel while the cell ran; it has "
                                "finished, but its output did not come back"
                            )
                        if reply is not None:
                            # The kernel finished the cell, and its output stream has said
                            # nothing since: its idle status (and maybe outputs) was lost.
                            raise NotebookError(
                                "the kernel finished the cell, but its output stream (iopub) fell "
                                f"silent for {LIVENESS_INTERVAL:g}s before the cell's end: some "
                                "of its outputs may be missing"
                            )
                    continue
                last_seen = now
                if isinstance(item, KernelRestarted):
                    self._died(collector, code, hidden, started, cell, "the kernel was restarted")
                if isinstance(item, ChannelClosed):
                    if self._closed:  # detach() let go of the kernel: the cell runs on there
                        raise NotebookError("the session was detached while the cell ran")
                    model = self._kernel_model()
                    if model is None or model.get("execution_state") == "dead":
                        self._died(
                            collector,
                            code,
                            hidden,
                            started,
                            cell,
                            self._why_gone(f"the kernel died ({item.reason})"),
                        )
                    if reconnects >= 3:
                        raise NotebookError(
                            f"lost the connection to the kernel while the cell ran ({item.reason})"
                        )
                    # The kernel lives: reconnect as the same client, and the server replays what
                    # the cell sent meanwhile.
                    reconnects += 1
                    channels.close()
                    with contextlib.suppress(NotebookError):
                        channels = self._channels = KernelChannels(
                            self._client, self.kernel_id, session=channels.session
                        )
                    continue
                parent = item.get("parent_header") or {}
                channel = item.get("channel")
                msg_type = item.get("msg_type") or item.get("header", {}).get("msg_type")
                content = item.get("content") or {}
                if not parent:
                    state = content.get("execution_state")
                    if msg_type == "status" and state in ("restarting", "dead"):
                        # "restarting": the server is already starting a fresh kernel in its place.
                        self._auto_restarted = state == "restarting"
                        self._died(collector, code, hidden, started, cell, "the kernel died")
                    continue
                if parent.get("msg_id") != msg_id:
                    self._absorb(item)
                    continue
                if channel == "shell":
                    reply = content
                elif channel == "iopub":
                    if msg_type == "status":
                        if content.get("execution_state") == "idle":
                            idle = True
                    elif msg_type == "execute_input":
                        self._note_started(
                            msg_id, content.get("execution_count"), (item.get("header") or {}).get("session")
                        )
                        if cell is not None:
                            # Saved with the next partial save: a later client that takes over
                            # this cell may never see its execute_input again.
                            cell["execution_count"] = content.get("execution_count")
                            self._stamp(cell)
                            self._nb.touch(cell)
                            unsaved = True
                            if self._doc is not None and self._doc.version:  # others write too
                                self._place(cell)
                    else:
                        collector.handle(msg_type, content)
                        unsaved = cell is not None
        finally:
            self._busy = False
            self._live = None
            self._running_cell = None
            if cell is not None and (reply is None or not idle):
                # It did not finish here (timeout, lost connection): keep what it printed so far.
                self._nb.touch(cell)
                with contextlib.suppress(Exception):
                    self.save()
        collector.error_from_reply(reply)
        count = None if hidden else reply.get("execution_count")
        result = collector.result(code, hidden=hidden, execution_count=count, started=started)
        if collector.model_info is not None:
            self._last_model_info = collector.model_info
        if cell is not None:
            self._record(result, cell)
        elif collector.updated_displays:
            self._nb.invalidate()
            self._nb.mark_all()
            self.save()
        if interrupted_at is not None:
            raise CellTimeoutError(
                f"the cell ran past its timeout of {timeout:g}s and was interrupted", result=result
            )
        return result

    def _note_started(self, msg_id: str, count: Any, kernel_run: Any = None) -> None:
        count = count if isinstance(count, int) else None
        if isinstance(kernel_run, str) and kernel_run and kernel_run != self._kernel_run:
            if self._kernel_run is not None:  # a kernel started since: its counts start again
                self._counts_seen.clear()
            self._kernel_run = kernel_run
        self._started[msg_id] = count
        if count is not None:
            self._counts_seen.add(count)
        if len(self._started) > 4096:
            for old in list(self._started)[:2048]:
                del self._started[old]

    def _stamp(self, cell: dict[str, Any]) -> None:
        """Name the kernel ``cell``'s execution count comes from (see :data:`KERNEL_KEY`)."""
        if self._kernel_run is not None and isinstance(cell.get("metadata"), dict):
            cell["metadata"][KERNEL_KEY] = self._kernel_run

    def _other_kernel(self, other: dict[str, Any]) -> bool:
        """Whether ``other``'s count comes from another kernel than this one's (an earlier one,
        before a restart): such counts say nothing about the order here."""
        theirs = (other.get("metadata") or {}).get(KERNEL_KEY)
        return theirs is not None and self._kernel_run is not None and theirs != self._kernel_run

    def _ran_after(self, other: dict[str, Any], count: int) -> bool:
        """Whether code cell ``other`` runs (or ran) after the cell with execution count
        ``count`` in this kernel: it waits to start, or started later."""
        if self._other_kernel(other):
            return False
        request = (other.get("metadata") or {}).get(RUNNING_KEY)
        if request:
            started = self._started.get(request, -1) if request in self._started else None
            return started is None or started > count
        if str(other.get("id")) in self._reran:
            return False
        theirs = other.get("execution_count")
        return isinstance(theirs, int) and theirs > count and theirs in self._counts_seen

    def _place_recent(self, how_many: int) -> None:
        """(Live document.) Place this session's last cells again, if other writers changed the
        document since they were placed: their cells may have come in after ours were placed."""
        doc = self._doc
        if doc is None or doc.version == self._placed_at:
            return
        with self._doc_lock:
            self._placed_at = doc.version
            for cell, count in list(self._recent)[-how_many:]:
                if cell.get("execution_count") == count:  # not run again in place since
                    self._place(cell)

    def _ran_before(self, other: dict[str, Any], count: int) -> bool:
        """Whether code cell ``other`` started before the cell with execution count ``count``
        in this kernel."""
        if self._other_kernel(other):
            return False
        request = (other.get("metadata") or {}).get(RUNNING_KEY)
        if not request and str(other.get("id")) in self._reran:
            return False
        theirs = self._started.get(request) if request else other.get("execution_count")
        return isinstance(theirs, int) and theirs < count and theirs in self._counts_seen

    def _place(self, cell: dict[str, Any]) -> None:
        """(Live document.) The kernel started ``cell`` (or finished it): it goes before the cells
        other writers put just ahead of it that the kernel runs after it (they wait to start, or
        started later), so the notebook stays in execution order however the writers' requests
        raced to the kernel and to the document; its count goes into the document now."""
        count = cell.get("execution_count")
        if self._doc is None or not isinstance(count, int) or self._other_kernel(cell):
            return  # a cell of an earlier kernel stays where it is: its count orders nothing now
        with self._doc_lock:
            self._pull()
            cells = self._nb.cells
            at = next((i for i, c in enumerate(cells) if c is cell), None)
            if at is None:
                return
            # Other cells (markdown, a person's notes) between are passed only on the way to a
            # code cell it must go before (after).
            to = at
            for i in range(at - 1, -1, -1):
                if cells[i].get("cell_type") != "code":
                    continue
                if not self._ran_after(cells[i], count):
                    break
                to = i
            if to == at:  # or after the cells put just behind it that the kernel ran first
                for i in range(at + 1, len(cells)):
                    if cells[i].get("cell_type") != "code":
                        continue
                    if not self._ran_before(cells[i], count):
                        break
                    to = i
            if to != at:
                cells.insert(to, cells.pop(at))
                self._nb.mark(cell)
                self._nb.mark_order()
                self._nb.invalidate()
            self._push()

    def _died(
        self,
        collector: OutputCollector,
        code: str,
        hidden: bool,
        started: float,
        cell: dict[str, Any] | None,
        why: str,
    ) -> NoReturn:
        result = collector.result(code, hidden=hidden, execution_count=None, started=started)
        self._dead = why
        server_gone = self._server_gone
        if cell is not None:
            result.execution_count = cell.get("execution_count")
            result.outputs.append(
                {
                    "output_type": "error",
                    "ename": "KernelDied",
                    "evalue": f"{why} while this cell ran",
                    "traceback": [f"KernelDied: {why} while this cell ran"],
                }
            )
            with contextlib.suppress(Exception):  # a server that is gone takes no notebook
                self._record(result, cell)
        if server_gone:
            raise JupyterServerDiedError(f"{why} while the cell ran", result=result)
        raise KernelDiedError(
            f"{why} while the cell ran; call session.restart() to start it again", result=result
        )

    def _why_gone(self, why: str) -> str:
        """``why``, or that the Jupyter server itself stopped answering (it took the kernel)."""
        try:
            self._client.request("GET", "/api/status", timeout=10)
        except OSError as exc:
            self._server_gone = True
            reason = exc.strerror or type(exc).__name__
            return (
                f"the Jupyter server at {self._client.url} stopped answering ({reason}); "
                "its kernels died with it"
            )
        return why

    def _begin_record(self, code: str, msg_id: str, outputs: list[dict[str, Any]]) -> dict[str, Any]:
        """Put a cell about to run in the notebook, marked running, and save it."""
        cell: dict[str, Any] = {
            "cell_type": "code",
            "execution_count": None,
            "id": new_cell_id(),
            "metadata": {RUNNING_KEY: msg_id},
            "outputs": outputs,
            "source": code,
        }
        self._pull()  # it goes after every cell run before it, whoever ran that
        self._place_recent(8)
        self._nb.add(cell)
        self.save()
        return cell

    def _record(self, result: CellResult, cell: dict[str, Any]) -> None:
        """The cell ``_begin_record`` added has finished: its outputs and count are final."""
        with self._doc_lock:  # marked changed at once: reading the document back keeps it
            cell["execution_count"] = result.execution_count
            cell["outputs"] = result.outputs
            cell["metadata"].pop(RUNNING_KEY, None)
            self._stamp(cell)
            if self._displays:
                self._nb.invalidate()
                self._nb.mark_all()
            else:
                self._nb.touch(cell)
            self._place(cell)  # where the kernel's order puts it, as other writers' cells came in
            self._recent.append((cell, cell.get("execution_count")))
        self.save()

    def partial_outputs(self) -> list[dict[str, Any]]:
        """The outputs of the cell running now, so far (nbformat dicts, copied); [] when none
        runs. Safe from any thread: what a client shows while a long cell runs. While
        :meth:`sync` waits for a cell an earlier client started, that cell's."""
        orphans = list(self._orphans.values())
        if orphans:
            orphan = orphans[-1]
            cell = next(
                (c for c in self._nb.cells if c.get("metadata", {}).get(RUNNING_KEY) == orphan.msg_id), None
            )
            saved = list(cell.get("outputs") or []) if cell is not None else []
            return [dict(out) for out in saved + list(orphan.collector.outputs)]
        live = self._live
        if live is None:
            return []
        return [dict(out) for out in list(live)]

    @property
    def server_died(self) -> bool:
        """True once the Jupyter server stopped answering (its kernels died with it): ``restart()``
        cannot help; :func:`seer.execution.restart_jupyter` and :meth:`reopen` can."""
        return self._server_gone

    def save(self, *, refresh: bool = False) -> None:
        """Render the notebook and hand it to the session's :attr:`writer`.

        The session saves after every cell and every edit; call it after changing the notebook
        some other way. ``refresh=True`` serialises every cell again, for outputs that grew in
        place (a cell still running on another thread). It does not take the session's lock, so
        it can record a running cell's outputs so far.
        """
        with self._doc_lock:
            if refresh:
                self._nb.invalidate()
                for cell in self._nb.cells:
                    if RUNNING_KEY in (cell.get("metadata") or {}):
                        self._nb.mark(cell)
            self._push()
            self._pull()
            text = self._nb.render()
        self.writer(self, text)

    # --- set-up: models and workspaces ----------------------------------------------------
    def _setup_cell(self, code: str, what: str, *, hidden: bool = True) -> CellResult:
        result = self._run(code, hidden=hidden, timeout=None, record=not hidden)
        if result.error is not None:
            raise CellExecutionError(f"{what} failed in the kernel:\n{result.error}", result=result)
        return result

    def _apply_env(self) -> None:
        """Give the kernel the variables core set for the sandbox after the server started."""
        self._setup_cell(
            _APPLY_ENV.replace("ENV_FILE", repr(self._kernel_env_file)), "setting the environment"
        )

    def _load_models(self) -> None:
        self._last_model_info = None
        if not self._preload_models:
            self.model_info_text = NO_MODELS_TEXT
            return
        self._setup_cell(_LOAD_MODELS, "loading the models", hidden=self._hidden_model_loading)
        info: dict[str, Any] = self._last_model_info or {}
        self.model_info_text = info.get("text") or NO_MODELS_TEXT

    def setup(self, workspace: Any) -> None:
        """Install ``workspace`` in the sandbox and make it live in the kernel: its libraries
        importable, its ``custom_init_code`` run (hidden). ``restart()`` does it again."""
        with self._lock:
            self._check_usable()
            self._apply(workspace)
            self.workspaces.append(workspace)

    def _apply(self, workspace: Any) -> None:
        if self.sandbox is None:
            raise NotebookError("setting up a workspace needs the session's sandbox")
        installed = workspace.install(self.sandbox)
        libs_dir = getattr(installed, "libs_dir", None)
        if libs_dir:
            self._setup_cell(
                "import importlib as __seer_il, sys as __seer_sys\n"
                f"if {str(libs_dir)!r} not in __seer_sys.path:\n"
                f"    __seer_sys.path.insert(0, {str(libs_dir)!r})\n"
                "__seer_il.invalidate_caches()\n"
                "del __seer_il, __seer_sys\n",
                "making the workspace libraries importable",
            )
        init_code = getattr(installed, "init_code", "") or ""
        if init_code.strip():
            self._setup_cell(init_code, "the workspace's init code")
        self.installed.append(installed)

    def _initialise(self, workspace: Any | None) -> None:
        """Load the models and set up ``workspace`` (at creation)."""
        with self._lock:
            if workspace is not None:
                self._preload_models = bool(getattr(workspace, "preload_models", True))
                self._hidden_model_loading = bool(getattr(workspace, "hidden_model_loading", True))
            self._apply_env()
            self._load_models()
            if workspace is not None:
                self._apply(workspace)
                self.workspaces.append(workspace)

    # --- lifecycle ------------------------------------------------------------------------
    def restart(self) -> None:
        """Restart the kernel (after it died, or to reset it) and set it up again: models
        loaded, workspaces applied. The notebook so far is kept."""
        if self._closed:
            raise NotebookError(f"notebook session {self.session_id} is shut down")
        try:
            self._client.request("GET", "/api/status", timeout=10)
        except OSError as exc:
            self._server_gone = True
            self._dead = self._dead or "the kernel died with its Jupyter server"
            raise JupyterServerDiedError(
                f"the Jupyter server at {self._client.url} does not answer "
                f"({exc.strerror or type(exc).__name__}): it stopped, and its kernels with it. Start it "
                "again (seer.execution.restart_jupyter(sandbox)), then session.reopen(sandbox)"
            ) from exc
        channels = self._channels
        if channels is not None and self._busy:
            channels.inbox.put(KernelRestarted())
        with self._lock:
            if not self._auto_restarted:
                self._restart_kernel()
            self._auto_restarted = False
            self._setup_again()

    def reopen(self, sandbox: Sandbox | str) -> None:
        """Carry on after the sandbox's Jupyter server was started again
        (:func:`seer.execution.restart_jupyter`): a new Jupyter session and kernel on it for the
        same notebook, set up as at creation (models loaded, workspaces applied). The notebook so
        far is kept; ``session_id``, ``kernel_id`` and ``jupyter_url`` change. ``sandbox`` is the
        sandbox (its recorded server is used) or the new server's ``jupyter_url``."""
        url = sandbox if isinstance(sandbox, str) else sandbox.jupyter_url
        if not url:
            raise NotebookError("the sandbox runs no Jupyter server")
        client = JupyterClient.from_url(url)
        with self._lock:
            if self._channels is not None:
                self._channels.close()
                self._channels = None
            self._close_document()
            self._client = client
            self._new_server_session()
            # The old server may not have saved its document: the notebook as held here is it.
            self._write_file()
            self._connect_document(new=True)
            self._setup_again()
            self.save()

    def _new_server_session(self) -> None:
        """A new Jupyter session (and kernel) for this notebook on the server, which no longer
        knows the old one (it was started again)."""
        model = self._client.call(
            "POST",
            "/api/sessions",
            {
                "path": self.notebook_path,
                "type": "notebook",
                "name": self.name,
                "kernel": {"name": "python3"},
            },
        )
        self.session_id = str(model["id"])
        self.kernel_id = str(model["kernel"]["id"])
        self._server_gone = False
        self._auto_restarted = False
        self._orphans.clear()

    def _setup_again(self) -> None:
        """(Under the lock.) Connect to a fresh kernel and set it up as at creation."""
        # After a crash the server may still be restarting the kernel on its own, racing the
        # restart above; a connection made meanwhile can drop mid-setup and lose a setup cell.
        # Setting up a fresh kernel again is harmless, so retry (bounded) when that happens.
        for attempt in range(RESTART_SETUP_ATTEMPTS):
            self._displays.clear()
            self._dead = None
            self._counts_seen.clear()  # a fresh kernel counts from 1 again
            self._kernel_run = None  # named again by its first message
            try:
                self._connect(fresh=True)
                self._apply_env()
                self._load_models()
                self.installed = []
                for workspace in self.workspaces:
                    self._apply(workspace)
                return
            except NotebookError:
                if attempt == RESTART_SETUP_ATTEMPTS - 1:
                    raise
                time.sleep(1.0)  # let the server's own restart finish
                if self._kernel_model() is None:
                    self._restart_kernel()  # the kernel is gone altogether: get a new one

    def _restart_kernel(self) -> None:
        """Restart the kernel through the server, or give the session a new one if it is gone."""
        status = 0
        for attempt in range(5):
            status, data = self._client.request("POST", f"/api/kernels/{self.kernel_id}/restart", timeout=180)
            if status in (200, 404):
                break
            # 500: typically a restart already under way (the server's own, after a crash).
            time.sleep(0.5 * (attempt + 1))
        if status == 404:
            known, _ = self._client.request("GET", f"/api/sessions/{self.session_id}")
            if known == 404:  # a server started again since: it knows neither
                self._new_server_session()
                return
            self.kernel_id = self._client.start_kernel()
            self._client.call("PATCH", f"/api/sessions/{self.session_id}", {"kernel": {"id": self.kernel_id}})
        elif status != 200:
            raise NotebookError(f"restarting kernel {self.kernel_id}: HTTP {status}: {data}")

    def detach(self) -> None:
        """Let go of the session without ending it: the kernel runs on (a cell too), and the
        Jupyter server keeps what the kernel sends for the next handle attaching with the same
        ``channel`` key (see :meth:`attach`). This handle is unusable afterwards."""
        self._closed = True
        channels, self._channels = self._channels, None
        if channels is not None:
            channels.close()
        self._close_document(save=True)

    def shutdown(self) -> None:
        """End the session: its kernel is shut down; the notebook stays. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._channels is not None:
            self._channels.close()
            self._channels = None
        self._close_document(save=True)
        with contextlib.suppress(NotebookError, OSError):
            self._client.request("DELETE", f"/api/sessions/{self.session_id}", timeout=30)

    # --- finding sessions again -----------------------------------------------------------
    @classmethod
    def attach(
        cls,
        jupyter_url: str,
        session_id: str,
        *,
        sandbox: Sandbox | None = None,
        outputs_dir: str | os.PathLike[str] | None = None,
        channel: str | None = None,
    ) -> NotebookSession:
        """A handle on a session created elsewhere (by another process), from ``jupyter_url`` and
        ``session_id``. Its notebook is read back and appended to; without ``sandbox`` it is written
        through the Jupyter contents API.

        Nothing the kernel ran is lost to the notebook: :meth:`sync` (run here when the kernel is
        idle) appends what the kernel ran that the notebook misses. ``channel`` is the kernel
        websocket's session key: a handle attaching again with the key an earlier one used (the
        notebook MCP server's ``seer-mcp-<session_id>``) is sent what the kernel sent meanwhile,
        so a cell the earlier one left running gets all its outputs. When the kernel is busy
        (:attr:`busy_at_attach`), that cell is still running: :meth:`sync` waits for it.
        """
        client = JupyterClient.from_url(jupyter_url)
        model = client.call("GET", f"/api/sessions/{session_id}", expect=(200,))
        path = model["path"]
        name = posixpath.splitext(posixpath.basename(path))[0]
        cells: list[dict[str, Any]] = []
        metadata = None
        status, nb = client.request("GET", f"/api/contents/{quote_path(path)}?type=notebook&content=1")
        if status == 200 and isinstance(nb, dict) and isinstance(nb.get("content"), dict):
            cells = list(nb["content"].get("cells", []))
            metadata = nb["content"].get("metadata") or None
        session = cls(
            client,
            session_id=session_id,
            kernel_id=model["kernel"]["id"],
            notebook_path=path,
            name=name,
            sandbox=sandbox,
            mirror_path=Path(outputs_dir) / f"{name}.ipynb" if outputs_dir else None,
            cells=cells,
            metadata=metadata,
        )
        session._channel_key = channel
        session._connect_document(new=False)
        session._connect()
        if session._orphans or session._kernel_busy():
            # A cell runs (one an earlier handle started, or another client's): asking the kernel
            # anything now would wait for it. sync() does, when the caller is ready to.
            session.busy_at_attach = True
            session.model_info_text = (
                "The kernel is busy running a cell started before this attach; its models are listed "
                "once it finishes."
            )
        else:
            session.sync()
        return session

    def _kernel_busy(self) -> bool:
        """Whether the kernel runs a cell now (a moment's ``busy`` around a request does not count)."""
        for _ in range(5):
            model = self._kernel_model()
            if model is None or model.get("execution_state") != "busy":
                return False
            time.sleep(0.1)
        return True

    def sync(self) -> list[CellResult]:
        """Bring the notebook up to date with what its kernel ran; return the cells recovered.

        Waits for a cell an earlier client left running (recording its outputs), then asks the
        kernel for its history (IPython's raw inputs and ``Out``) and appends the executed cells the
        notebook misses after the last one it holds, in order, each with its value (printed output
        is gone by then); a cell still marked running gets its execution count and value.
        Refreshes ``model_info_text`` and ``sandbox_id``. Safe to call any time.
        """
        with self._lock:
            before = len(self.recovered)
            state_cell = self._run(_KERNEL_STATE, hidden=True, timeout=None, record=False)
            for orphan in list(self._orphans.values()):  # finished, whatever arrived of them
                self._fold(orphan)
            try:
                state = json.loads(state_cell.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError) as exc:
                raise NotebookError(f"the kernel did not report its history: {state_cell}") from exc
            self.model_info_text = state.get("model_info") or NO_MODELS_TEXT
            self.sandbox_id = state.get("sandbox_id") or self.sandbox_id
            self.busy_at_attach = False
            self._reconcile(list(state.get("inputs") or []), set(state.get("values") or []))
            return self.recovered[before:]

    def _reconcile(self, inputs: list[str], values: set[int]) -> None:
        """(Under the lock.) Match the kernel's history (``inputs[n]``: the source of In [n]) with
        the notebook's code cells, in order; record what is missing after the last match."""
        code_cells = [c for c in self._nb.cells if c.get("cell_type") == "code"]
        matched: dict[int, dict[str, Any]] = {}
        pos = 0
        for n in range(1, len(inputs)):
            source = str(inputs[n]).strip()
            for j in range(pos, len(code_cells)):
                cell = code_cells[j]
                if source_text(cell.get("source", "")).strip() == source and cell.get("execution_count") in (
                    n,
                    None,
                ):
                    matched[n] = cell
                    pos = j + 1
                    break
        last = max(matched, default=0)
        wanted: dict[int, dict[str, Any]] = {}
        changed = False
        for n, cell in matched.items():
            if RUNNING_KEY in cell.get("metadata", {}):
                cell["metadata"].pop(RUNNING_KEY)
                cell["execution_count"] = n
                self._nb.touch(cell)
                changed = True
                if n in values and not any(o.get("output_type") == "execute_result" for o in cell["outputs"]):
                    wanted[n] = cell
        for n in range(last + 1, len(inputs)):
            cell = {
                "cell_type": "code",
                "execution_count": n,
                "id": new_cell_id(),
                "metadata": {},
                "outputs": [],
                "source": str(inputs[n]),
            }
            self._nb.add(cell)
            changed = True
            if n in values:
                wanted[n] = cell
            else:
                self.recovered.append(CellResult(code=cell["source"], execution_count=n))
        if wanted:
            got = self._run(
                _KERNEL_VALUES.replace("NUMBERS", repr(sorted(wanted))), hidden=True, timeout=60, record=False
            )
            try:
                bundles = json.loads(got.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                bundles = {}
            for n, cell in sorted(wanted.items()):
                data = bundles.get(str(n))
                if data:
                    cell["outputs"].append(
                        {"output_type": "execute_result", "execution_count": n, "data": data, "metadata": {}}
                    )
                    self._nb.touch(cell)
                self.recovered.append(
                    CellResult(
                        code=source_text(cell["source"]),
                        result=(data or {}).get("text/plain"),
                        outputs=cell["outputs"],
                        execution_count=n,
                    )
                )
        if changed:
            self.save()


def unique_notebook_path(client: JupyterClient, directory: str, name: str) -> tuple[str, str]:
    """``(path, name)`` of a notebook ``<directory>/<name>.ipynb`` that does not exist yet."""
    candidate = name
    for n in range(2, 1000):
        path = posixpath.join(directory, f"{candidate}.ipynb")
        if not client.path_exists(path):
            return path, candidate
        candidate = f"{name}-{n}"
    raise NotebookError(f"too many notebooks named {name!r} in {directory!r}")


# --- making sessions -------------------------------------------------------------------------

#: Where notebooks go in the sandbox, relative to its working directory (the Jupyter root).
NOTEBOOK_DIR = "notebooks"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _claim_warm_kernel(client: Any, service: dict[str, Any]) -> str | None:
    """The kernel the notebook mode started ahead of time, if no session has taken it yet."""
    warm = service.get("warm_kernel")
    if not warm:
        return None
    try:
        if any(s.get("kernel", {}).get("id") == warm for s in client.sessions()):
            return None
        model = client.kernel(warm)
    except (NotebookError, OSError):
        return None
    if model is None or model.get("execution_state") == "dead":
        return None
    return str(warm)


def create_notebook_session(
    sandbox: Sandbox,
    workspace: Any = None,
    *,
    name: str | None = None,
    outputs_dir: str | os.PathLike[str] | Literal[False] | None = None,
) -> NotebookSession:
    """A new Jupyter session in ``sandbox``: a kernel with the sandbox's models loaded (unless
    ``workspace.preload_models`` is off) and ``workspace`` set up, writing
    ``notebooks/<name>.ipynb`` in the sandbox.

    The notebook is mirrored to ``<outputs_dir>/<name>.ipynb`` on this machine (default
    ``sandbox.outputs_dir``: ``$SEER_OUTPUTS_DIR/<sandbox_id>/`` or ``./seer-outputs/<sandbox_id>/``
    as resolved when the sandbox started; ``outputs_dir=False`` turns the mirror off). ``name``
    defaults to ``session-<date>-<time>``; a name already taken gets a ``-2``, ``-3``, ... suffix.
    If anything fails, the kernel is shut down and the error raised.
    """
    from seer.extras import require

    require("websocket", NOTEBOOK_PURPOSE)  # before a kernel is started that could not be reached
    if name is not None and not _NAME.match(name):
        raise ConfigError(
            f"name: {name!r} is not a usable notebook name (letters, digits, '.', '_', '-'; at most 100)"
        )
    service = sandbox.services.get("jupyter")
    if not service:
        raise NotebookError(
            f"sandbox {sandbox.sandbox_id} runs no Jupyter server (execution_mode is "
            f"{str(sandbox.config.execution_mode)!r}); start it with execution_mode='notebook'"
        )
    client = JupyterClient(service["url"], service["token"])
    path, name = unique_notebook_path(client, NOTEBOOK_DIR, name or time.strftime("session-%Y%m%d-%H%M%S"))
    if outputs_dir is False:
        mirror = None
    else:
        base = Path(outputs_dir) if outputs_dir else sandbox.outputs_dir
        mirror = base.absolute() / f"{name}.ipynb"

    kernel_id = _claim_warm_kernel(client, service) or client.start_kernel(
        service.get("kernel_name", "python3")
    )
    return open_notebook_session(
        client,
        kernel_id,
        path,
        name,
        workspace=workspace,
        sandbox=sandbox,
        mirror_path=mirror,
        kernel_env_file=service.get("kernel_env"),
    )


def open_notebook_session(
    client: JupyterClient,
    kernel_id: str,
    path: str,
    name: str,
    *,
    workspace: Any = None,
    sandbox: Sandbox | None = None,
    mirror_path: Path | None = None,
    kernel_env_file: str | None = None,
    cells: list[dict[str, Any]] | None = None,
    metadata: dict[str, Any] | None = None,
) -> NotebookSession:
    """A Jupyter session for notebook ``path`` on a started kernel, set up (models, ``workspace``).

    What :func:`create_notebook_session` does once it has a kernel; also used where only the
    Jupyter server's URL is known (the notebook MCP server). ``cells`` and ``metadata`` (from
    :func:`seer.notebook.document.notebook_cells`) start the notebook with those cells, to continue an
    existing one. On failure the kernel is shut down.
    """
    session: NotebookSession | None = None
    try:
        model = client.call(
            "POST",
            "/api/sessions",
            {"path": path, "type": "notebook", "name": name, "kernel": {"id": kernel_id}},
        )
        session = NotebookSession(
            client,
            session_id=model["id"],
            kernel_id=kernel_id,
            notebook_path=path,
            name=name,
            sandbox=sandbox,
            mirror_path=mirror_path,
            kernel_env_file=kernel_env_file,
            cells=cells,
            metadata=metadata,
        )
        session.save()
        session._connect_document(new=True)
        session._connect(fresh=True)
        session._initialise(workspace)
        session.save()
    except BaseException:
        if session is not None:
            session.shutdown()
        else:
            client.request("DELETE", f"/api/kernels/{kernel_id}")
        raise
    return session

"""The sessions one notebook MCP server drives (:class:`SessionRegistry`): attaching (once, under a
lock), starting, the session a call without ``session_id`` goes to, running cells one at a time,
restarting, and where each notebook's client-side copy goes."""

from __future__ import annotations

import functools
import os
import threading
import time
import urllib.parse
import uuid
from typing import TYPE_CHECKING, Any

from seer.errors import (
    JupyterServerDiedError,
    KernelDiedError,
)
from seer.notebook import (
    JupyterClient,
    NotebookSession,
)

from seer_mcp.cells import Cell, Entry, NotebookWriter, Runner, adopt_cell, close_entry, run_cell
from seer_mcp.channels import claim_shared_key
from seer_mcp.failures import (
    MAX_CODE,
    PROBE_TIMEOUT,
    ToolFailure,
    busy_text,
    check_index,
    dead_text,
    probe,
    redact,
    server_sessions,
)
from seer_mcp.records import place_copy, sandbox_of, session_on_record
from seer_mcp.rendering import as_text

if TYPE_CHECKING:
    pass


#: Lifetime of a sandbox ``start_new_session`` starts (it ends earlier with its session or server).
LOCAL_SANDBOX_TIMEOUT = 4 * 3600

# --- the sessions this server knows ---------------------------------------------------------


class SessionRegistry:
    """The sessions one server drives, by id. Thread-safe; every method may block (HTTP)."""

    def __init__(
        self,
        *,
        default_session_id: str | None = None,
        default_url: str | None = None,
        outputs_dir: str | None = None,
        sandbox_id: str | None = None,
        notebook_path: str | None = None,
        models_text: str | None = None,
    ):
        self.default_session_id = default_session_id or None
        self.default_url = default_url or None
        self.outputs_dir = outputs_dir or None
        #: the default session's sandbox and notebook: how to find the session again after its
        #: Jupyter server was started again (the configured id and URL are stale then)
        self.sandbox_id = sandbox_id or None
        self.notebook_path = notebook_path or None
        #: the default session's models, as the config describes them (for the instructions)
        self.models_text = models_text or None
        #: the session the agent last attached or started: where a call without session_id goes
        self.current: str | None = None
        self._entries: dict[str, Entry] = {}
        #: attaching (or starting) a session happens once at a time: parallel first calls wait
        #: for the one attach, then find its session
        self._attach_lock = threading.RLock()
        #: old session id -> new, for sessions that got a new id (their Jupyter server was restarted)
        self._aliases: dict[str, str] = {}
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> SessionRegistry:
        env = os.environ if environ is None else environ
        return cls(
            default_session_id=env.get("SEER_SESSION_ID"),
            default_url=env.get("SEER_JUPYTER_URL") or env.get("SEER_URL"),
            outputs_dir=env.get("SEER_OUTPUTS_DIR"),
            sandbox_id=env.get("SEER_SANDBOX_ID"),
            notebook_path=env.get("SEER_NOTEBOOK_PATH"),
            models_text=env.get("SEER_SESSION_MODELS"),
        )

    # --- finding sessions --------------------------------------------------------------------
    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries.values())

    def known(self) -> str:
        """The sessions this server knows, for an error message."""
        entries = self.entries()
        pending = self.pending_default()
        if not entries and not pending:
            return (
                "No session is attached yet: call attach_to_session(session_id, jupyter_url) with the JSON "
                "your setup script printed (or start_new_session() for a local scratch kernel, no GPU)."
            )
        lines = [f"- {e.session.session_id} (notebook {e.session.notebook_path})" for e in entries]
        if pending:
            lines.append(f"- {pending} (the default session, attached on first use)")
        return (
            "Known sessions:\n"
            + "\n".join(lines)
            + "\nFor another session, call attach_to_session(session_id, jupyter_url) with the JSON "
            "its setup script printed."
        )

    def pending_default(self) -> str | None:
        sid = self.default_session_id
        if sid and self.default_url:
            with self._lock:
                if sid not in self._entries:
                    return sid
        return None

    def lookup(self, session_id: str) -> Entry | None:
        """The entry for ``session_id`` ("" for the only or default one), if it needs no I/O."""
        session_id = (session_id or "").strip()
        with self._lock:
            if self._closed:
                raise ToolFailure("the server is shutting down")
            session_id = self._aliases.get(session_id, session_id)
            if session_id:
                return self._entries.get(session_id)
            if self.current is not None:  # the agent's choice (None once it shut that session down)
                return self._entries.get(self.current)
            if self.default_session_id and self.default_session_id in self._entries:
                return self._entries[self.default_session_id]
            if len(self._entries) == 1 and not self._pending_default_locked():
                return next(iter(self._entries.values()))
        return None

    def _make_current(self, entry: Entry) -> Entry:
        with self._lock:
            self.current = entry.session.session_id
        return entry

    def _pending_default_locked(self) -> bool:
        return bool(
            self.default_session_id and self.default_url and self.default_session_id not in self._entries
        )

    def resolve(self, session_id: str) -> Entry:
        """The entry for ``session_id`` ("": the default or only one), attaching the default session
        configured in the environment on first use."""
        entry = self.lookup(session_id)
        if entry is not None:
            return entry
        with self._attach_lock:  # parallel first calls: one attaches, the others find its session
            entry = self.lookup(session_id)
            if entry is not None:
                return entry
            session_id = (session_id or "").strip()
            default = self.default_session_id
            if not session_id and self.current is not None:
                raise ToolFailure(
                    f"Session {self.current!r}, the one you last attached or started, is shut down: pass "
                    f"session_id. {self.known()}"
                )
            if default and self.default_url and session_id in ("", default):
                return self._attach_default()
            if not session_id:
                count = len(self.entries())
                raise ToolFailure(
                    self.known()
                    if count == 0
                    else f"{count} sessions and none chosen: pass session_id. {self.known()}"
                )
            raise ToolFailure(f"Unknown session_id {session_id!r}. {self.known()}")

    def _attach_default(self) -> Entry:
        """(Under the attach lock.) The configured default session; when its Jupyter server was
        started again since the config was made (the id or URL is stale), the session on the
        sandbox's current server that holds the configured notebook."""
        default, url = self.default_session_id, self.default_url
        assert default and url
        try:
            return self.attach(default, url)[0]
        except ToolFailure as failure:
            if not (self.sandbox_id and self.notebook_path):
                raise
            found = session_on_record(self.sandbox_id or "", self.notebook_path)
            if found is None:
                raise ToolFailure(
                    f"{failure}\nThe sandbox {self.sandbox_id} has no session for the notebook "
                    f"{self.notebook_path} either: attach_to_session(sandbox_id={self.sandbox_id!r}) "
                    "starts a new one (and the Jupyter server, if it died)."
                ) from failure
        new_id, new_url = found
        entry = self.attach(new_id, new_url)[0]
        with self._lock:
            self._aliases[default] = entry.session.session_id
            self.default_session_id, self.default_url = entry.session.session_id, new_url
        return entry

    def adopt(self, session: NotebookSession, origin: str = "created") -> Entry:
        """Drive ``session``, made elsewhere (e.g. by a tool of :mod:`seer_mcp.notebook_tools`); it
        is the current session from now on."""
        return self._make_current(self._add(Entry(session, origin)))

    def _add(self, entry: Entry) -> Entry:
        place_copy(entry.session, self.outputs_dir)
        entry.writer = NotebookWriter(entry.session)
        entry.session.save()  # the client-side copy holds the whole notebook from now on
        with self._lock:
            closed = self._closed
            if not closed:
                self._entries[entry.session.session_id] = entry
        if closed:
            close_entry(entry, shutdown=entry.origin != "attached")
            raise ToolFailure("the server is shutting down")
        return entry

    # --- getting sessions --------------------------------------------------------------------
    def attach(
        self, session_id: str = "", jupyter_url: str = "", sandbox_id: str = "", name: str = ""
    ) -> tuple[Entry, str]:
        """Attach to a session (``session_id``), or start a new one on a sandbox's Jupyter server
        (``sandbox_id``, or just ``jupyter_url``); ``(entry, what happened)``. The session is the
        current one from now on: calls without ``session_id`` go to it."""
        with self._attach_lock:
            entry, how = self._attach(session_id, jupyter_url, sandbox_id, name)
        return self._make_current(entry), how

    def _attach(self, session_id: str, jupyter_url: str, sandbox_id: str, name: str) -> tuple[Entry, str]:
        session_id, jupyter_url, sandbox_id = (
            (session_id or "").strip(),
            (jupyter_url or "").strip(),
            (sandbox_id or "").strip(),
        )
        if sandbox_id:  # an id is never a path: checked before anything looks it up
            from seer.preflight import sandbox_id_providers

            sandbox_id_providers(sandbox_id)
        if session_id:
            with self._lock:
                existing = self._entries.get(self._aliases.get(session_id, session_id))
            if existing is not None:
                return existing, "already attached"
        if not session_id and sandbox_id:
            return self._from_sandbox(sandbox_id, name), "started a new session in the sandbox"
        url = jupyter_url or self.default_url or ""
        if not url:
            raise ToolFailure(
                "Pass jupyter_url (with its ?token=): the JSON your setup script printed has it, next to "
                "session_id. `seer up` prints it too (then pass sandbox_id instead of session_id)."
            )
        client = probe(url)
        if not session_id:
            return self._add(self._create_on(client, name)), "started a new session on the server"
        status, model = client.request("GET", f"/api/sessions/{urllib.parse.quote(session_id)}")
        if status == 404:
            raise ToolFailure(
                f"The Jupyter server at {client.url} has no session {session_id!r}. "
                f"{server_sessions(client)} Use the session_id your setup script printed "
                "(session.session_id), or leave session_id empty to start a new session on this server."
            )
        if status != 200:
            raise ToolFailure(
                f"GET /api/sessions/{session_id} on {client.url} answered HTTP {status}: {model}"
            )
        try:
            session = NotebookSession.attach(
                client.jupyter_url, session_id, channel=channel_key(session_id, model)
            )
        except KernelDiedError as exc:
            raise ToolFailure(
                f"Session {session_id!r} exists but its kernel is dead ({exc}). Start a new session "
                "(leave session_id empty) or re-run the setup script."
            ) from exc
        entry = self._add(Entry(session, "attached"))
        if session.busy_at_attach:
            self._adopt_running(entry)
            return entry, "attached while a cell runs"
        return entry, "attached"

    def _adopt_running(self, entry: Entry) -> None:
        """The kernel runs a cell started before this server attached: follow it as this server's
        latest cell (get_cell_result waits for it; execute_code says the session is busy)."""
        session = entry.session
        running = next(
            (c for c in reversed(session.cells) if "seer_running" in (c.get("metadata") or {})), None
        )
        code = as_text(running.get("source", "")) if running is not None else ""
        cell = Cell(code=code or "(a cell started before this server attached)", adopted=True, detached=True)
        if running is not None:
            cell.index = next(i for i, c in enumerate(session.cells) if c is running)
        with entry.lock:
            entry.cell = cell
            if entry.runner is None:
                entry.runner = Runner(f"seer-mcp-cells-{session.session_id[:8]}")
            entry.runner.submit(functools.partial(adopt_cell, entry, cell, lambda: self._refresh_copy(entry)))

    def _refresh_copy(self, entry: Entry) -> None:
        """(After sync) the sandbox is known now: move the client-side copy where it belongs."""
        before = entry.session.local_path
        place_copy(entry.session, self.outputs_dir)
        if entry.session.local_path != before and entry.writer is not None:
            entry.session.save()

    def _from_sandbox(self, sandbox_id: str, name: str) -> Entry:
        from seer import Sandbox
        from seer.errors import SandboxNotFoundError
        from seer.execution import create_notebook_session

        try:
            sandbox = Sandbox.attach(sandbox_id)
        except SandboxNotFoundError as exc:
            raise ToolFailure(
                f"{exc}. `seer ls` lists running sandboxes; pass session_id and jupyter_url instead if a "
                "setup script printed them."
            ) from exc
        if not sandbox.jupyter_url:
            raise ToolFailure(
                f"Sandbox {sandbox_id} runs no Jupyter server (its execution_mode is not 'notebook')."
            )
        try:
            JupyterClient.from_url(sandbox.jupyter_url).request("GET", "/api/status", timeout=PROBE_TIMEOUT)
        except OSError:  # the server died: start it again (its kernels died with it)
            from seer.execution import restart_jupyter

            restart_jupyter(sandbox)
        session = create_notebook_session(sandbox, name=name or None)
        return self._add(Entry(session, "created"))

    def _create_on(self, client: JupyterClient, name: str) -> Entry:
        """A new session (kernel with the sandbox's models, new notebook) on ``client``'s server.

        Mirrors :func:`seer.execution.create_notebook_session` for a server known only by its URL.
        """
        from seer.execution import NOTEBOOK_DIR, open_notebook_session
        from seer.notebook import unique_notebook_path

        path, name = unique_notebook_path(client, NOTEBOOK_DIR, name or time.strftime("agent-%Y%m%d-%H%M%S"))
        session = open_notebook_session(client, client.start_kernel(), path, name)
        session.sync()  # learns the sandbox it runs in (for the client-side copy)
        return Entry(session, "created")

    def start_local(self, name: str = "") -> Entry:
        """A local sandbox (this machine, no GPU, no models) and a notebook session in it."""
        from seer import Sandbox, SandboxConfig
        from seer.execution import create_notebook_session

        sandbox = Sandbox(
            SandboxConfig(provider="local", execution_mode="notebook", timeout=LOCAL_SANDBOX_TIMEOUT)
        ).start()
        try:
            session = create_notebook_session(sandbox, name=name or None)
        except BaseException:
            sandbox.terminate()
            raise
        return self._make_current(self._add(Entry(session, "local", sandbox=sandbox)))

    # --- running cells -----------------------------------------------------------------------
    def begin(
        self, entry: Entry, code: str, *, replace: int | None = None, timeout: float | None = None
    ) -> Cell:
        """Start ``code`` in a thread of its own; refuse while another cell runs, and code over
        :data:`MAX_CODE` characters."""
        session = entry.session
        sid = session.session_id
        if len(code) > MAX_CODE:
            raise ToolFailure(
                f"The code is {len(code):,} characters long; a cell takes at most {MAX_CODE:,}. Nothing ran. "
                "Put big data in a file in the sandbox (write it in smaller pieces, or upload it with your "
                "setup script) and read it from a short cell."
            )
        with entry.lock:
            running = entry.cell
            if running is not None and not running.done.is_set():
                raise ToolFailure(busy_text(sid, running))
            if not session.alive:
                raise ToolFailure(dead_text(session))
            if replace is not None:
                check_index(session, replace)
            cell = Cell(code=code, replace=replace)
            if running is not None and running.detached and not running.collected:
                where = f"cell {running.index}" if running.index is not None else "a cell"
                index = "" if running.index is None else f", cell_index={running.index}"
                cell.note = (
                    f"Note: {where}, whose call was abandoned while it ran, has finished; "
                    f"get_cell_result(session_id={sid!r}{index}) shows its output."
                )
            entry.cell = cell
            if entry.runner is None:
                entry.runner = Runner(f"seer-mcp-cells-{sid[:8]}")
            entry.runner.submit(functools.partial(run_cell, entry, cell, timeout))
        return cell

    def add_markdown(self, entry: Entry, text: str) -> int:
        session = entry.session
        with entry.lock:
            if entry.busy:
                assert entry.cell is not None
                raise ToolFailure(busy_text(session.session_id, entry.cell))
            session.add_markdown(text)
            return len(session.cells) - 1

    def edit_markdown(self, entry: Entry, index: int, text: str) -> None:
        session = entry.session
        with entry.lock:
            if entry.busy:
                assert entry.cell is not None
                raise ToolFailure(busy_text(session.session_id, entry.cell))
            session.set_source(index, text)

    def shutdown(self, entry: Entry) -> None:
        with self._lock:
            self._entries.pop(entry.session.session_id, None)
            for old in [k for k, v in self._aliases.items() if v == entry.session.session_id]:
                del self._aliases[old]
        close_entry(entry, shutdown=True)

    def restart(self, entry: Entry) -> str:
        """Restart the session's kernel with the models; if its Jupyter server died, start the
        server again first (the session gets a new id; the old one still names it here). Returns
        what happened, for the agent."""
        session = entry.session
        try:
            session.restart()
            return f"Restarted the kernel of session {session.session_id}."
        except JupyterServerDiedError as exc:
            sandbox = sandbox_of(session)
            if sandbox is None:
                raise ToolFailure(
                    f"{exc}. This server cannot tell which sandbox the session ran in, so it cannot start "
                    "the server again: run `seer ls` to find the sandbox, then start a new session with "
                    "attach_to_session(sandbox_id=...) (it starts the Jupyter server again if need be)."
                ) from exc
        from seer.execution import restart_jupyter

        old = session.session_id
        restart_jupyter(sandbox)
        session.reopen(sandbox)
        with self._lock:
            self._entries.pop(old, None)
            self._entries[session.session_id] = entry
            for key, value in list(self._aliases.items()):
                if value == old:
                    self._aliases[key] = session.session_id
            self._aliases[old] = session.session_id
            if self.default_session_id == old:
                self.default_session_id = session.session_id
            if self.current == old:
                self.current = session.session_id
        return (
            f"The Jupyter server had died; started it again in sandbox {sandbox.sandbox_id} "
            f"({redact(sandbox.jupyter_url or '')}) and a new session {session.session_id} for the same "
            f"notebook (session_id {old!r} still works with this server)."
        )

    def close(self) -> None:
        """(Server exit.) Shut down what this server started; leave attached sessions running."""
        with self._lock:
            self._closed = True
            entries = list(self._entries.values())
            self._entries.clear()
        # In parallel: a client stops a server that has not exited a few seconds after it closed
        # its stdin.
        closers = [
            threading.Thread(target=close_entry, args=(e,), kwargs={"shutdown": False}, daemon=True)
            for e in entries
        ]
        for closer in closers:
            closer.start()
        deadline = time.monotonic() + 60
        for closer in closers:
            closer.join(timeout=max(0.0, deadline - time.monotonic()))


def channel_key(session_id: str, model: dict[str, Any]) -> str:
    """The kernel websocket's session key for a server attaching to ``session_id`` (``model``: the
    Jupyter session as ``GET /api/sessions/<id>`` answers it).

    With no client connected to the kernel, the key every server before this one used: Jupyter
    buffers what the kernel sends while no client is connected and replays it to the next
    connection with the last key, so a cell a previous server left running gets all its outputs.
    With a client connected (a Python session, another MCP server, a browser), a key of this
    server's own: Jupyter closes an open connection whose key a new one reuses, so servers sharing
    a key cut each other's running cells off (and buffers nothing while a client is connected).

    The shared key is also claimed (:func:`seer_mcp.channels.claim_shared_key`): servers
    attaching at the same instant all see no client connected, and only the one that claims it
    takes it.
    """
    kernel = model.get("kernel") if isinstance(model, dict) else None
    connections = kernel.get("connections") if isinstance(kernel, dict) else None
    if not connections and claim_shared_key(session_id):
        return f"seer-mcp-{session_id}"
    return f"seer-mcp-{session_id}-{os.getpid()}-{uuid.uuid4().hex[:8]}"

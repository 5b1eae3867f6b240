"""Shared by the live-notebook tests (local and Docker): several writers on one notebook at once,
and a collaborative client speaking the room's protocol as a browser's JupyterLab does.

:class:`BrowserLikeClient` is written here on pycrdt and jupyter-ydoc alone, not on
:class:`seer.notebook.live.LiveNotebook`, so that what it puts in the document arrives as another
program's edits would, not through the code under test.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat


class BrowserLikeClient:
    """A raw Y websocket client of a notebook's room: joins it, and adds markdown cells at the end
    of the document as a person typing in JupyterLab would."""

    def __init__(self, jupyter_url: str, path: str):
        import pycrdt
        import websocket
        from jupyter_ydoc import YNotebook
        from seer.notebook import JupyterClient

        client = JupyterClient.from_url(jupyter_url)
        session = client.call(
            "PUT", f"/api/collaboration/session/{path}", {"format": "json", "type": "notebook"}
        )
        url = client.ws_url(
            f"/api/collaboration/room/json:notebook:{session['fileId']}?sessionId={session['sessionId']}"
        )
        self._pycrdt = pycrdt
        self.doc = pycrdt.Doc()
        self.notebook = YNotebook(self.doc)
        self._lock = threading.Lock()
        self._applying = False
        self._synced = threading.Event()
        self._ws = websocket.create_connection(url, header=[f"Authorization: token {client.token}"])
        self.doc.observe(self._send_local)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._ws.send_binary(pycrdt.create_sync_message(self.doc))
        assert self._synced.wait(30), "the room never answered the sync request"

    def _send_local(self, event: Any) -> None:
        if not self._applying:
            self._ws.send_binary(self._pycrdt.create_update_message(event.update))

    def _read(self) -> None:
        try:
            while True:
                data = self._ws.recv()
                if not data:
                    return
                if isinstance(data, bytes) and data[0] == 0:  # a sync message
                    with self._lock:
                        self._applying = True
                        try:
                            reply = self._pycrdt.handle_sync_message(data[1:], self.doc)
                        finally:
                            self._applying = False
                    if reply is not None:
                        self._ws.send_binary(reply)
                    if data[1] == 1:
                        self._synced.set()
        except Exception:
            return

    def add_markdown(self, text: str) -> None:
        """Append a markdown cell, as typed in the browser."""
        with self._lock:
            self.notebook.append_cell(
                {"cell_type": "markdown", "id": uuid.uuid4().hex[:8], "metadata": {}, "source": text}
            )

    def sources(self) -> list[str]:
        with self._lock:
            return [str(c["source"]) for c in self.notebook.get()["cells"]]

    def close(self) -> None:
        self._ws.close()


def in_lockstep(rounds: int, steps: list[Callable[[int], None]]) -> list[BaseException]:
    """Each of ``steps`` in a thread of its own, called with rounds ``0 .. rounds - 1``; each
    round, all of them start together (a barrier; a step that fails aborts it, so the others stop
    too). Returns what failed once every thread has ended, or has run 600 s (then that is a
    failure too)."""
    barrier = threading.Barrier(len(steps))
    failures: list[BaseException] = []

    def run(step: Callable[[int], None]) -> None:
        try:
            for r in range(rounds):
                barrier.wait(timeout=120)
                step(r)
        except BaseException as exc:  # returned to the caller
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(step,)) for step in steps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    if any(t.is_alive() for t in threads):
        failures.append(AssertionError("a writer is still running after 600 s"))
    return failures


def three_writers(session: Any, rounds: int, *, sandbox: Any) -> None:
    """Three writers on ``session``'s notebook at once, ``rounds`` rounds: the session itself, two
    more handles on the same Jupyter session (as the notebook MCP server attaches), and a
    browser-like client adding a markdown cell each round; every round all four start together.
    Then: every cell, once, in execution order, with its output, in the sandbox's ``.ipynb`` and in
    the client copy."""
    from seer.notebook import NotebookSession

    others = [NotebookSession.attach(session.jupyter_url, session.session_id) for _ in range(2)]
    for other in others:  # their client copy is this session's
        other.local_path = session.local_path
    browser = BrowserLikeClient(session.jupyter_url, session.notebook_path)
    writers = [("py", session), ("w1", others[0]), ("w2", others[1])]

    def writer(tag: str, handle: Any) -> Callable[[int], None]:
        def write(r: int) -> None:
            result = handle.exec(f"print('{tag}-{r}')")
            assert result.stdout == f"{tag}-{r}\n", result

        return write

    failures = in_lockstep(
        rounds, [*(writer(*w) for w in writers), lambda r: browser.add_markdown(f"typed-{r}")]
    )
    try:
        assert not failures, failures
        for handle in [*others, session]:
            handle.flush()  # the last one's client copy holds what every writer wrote
        expected_code = {f"print('{tag}-{r}')" for tag, _ in writers for r in range(rounds)}
        expected_typed = {f"typed-{r}" for r in range(rounds)}
        check_kept(sandbox, session, browser, expected_code, expected_typed)
    finally:
        browser.close()
        for other in others:
            other.detach()


def check_kept(
    sandbox: Any, session: Any, browser: BrowserLikeClient, expected_code: set[str], expected_typed: set[str]
) -> tuple[Any, Any]:
    """The sandbox's ``.ipynb`` and ``session``'s client copy each pass :func:`check_cells`, and
    the browser's replica comes to hold the same cells; returns ``(on_disk, client_copy)``."""
    on_disk = nbformat.reads(sandbox.read_file(session.notebook_path), as_version=4)
    assert session.local_path is not None
    client_copy = nbformat.reads(Path(session.local_path).read_text(), as_version=4)
    for where, nb in (("the sandbox's .ipynb", on_disk), ("the client copy", client_copy)):
        check_cells(where, nb, expected_code, expected_typed)
    deadline = time.monotonic() + 30
    while browser.sources() != [c.source for c in on_disk.cells] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert browser.sources() == [c.source for c in on_disk.cells]
    return on_disk, client_copy


def check_cells(where: str, nb: Any, expected_code: set[str], expected_typed: set[str]) -> None:
    """``nb`` holds each expected code cell once, in execution order, with what it printed (its
    source is ``print('<text>')``), and each expected markdown cell once; no cell is left marked
    running."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    typed = [c.source for c in nb.cells if c.cell_type == "markdown"]
    sources = [c.source for c in code]
    assert sorted(sources) == sorted(expected_code), f"{where}: {json.dumps(sources)}"
    assert sorted(typed) == sorted(expected_typed), f"{where}: {typed}"
    counts = [c.execution_count for c in code]
    assert None not in counts and counts == sorted(counts), f"{where}: not in execution order: {counts}"
    for cell in code:
        printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        assert printed == cell.source[len("print('") : -len("')")] + "\n", (where, cell)
        assert "seer_running" not in cell.metadata, (where, cell)

"""Shared by the live-notebook tests with real MCP clients (local and Docker, issue #22): a Python
:class:`~seer.notebook.NotebookSession`, two notebook MCP servers started from exactly
``session.mcp_config`` (the mcp SDK's stdio client, with only that config's environment), and a
browser-like collaborative client, all writing one notebook at once.

The MCP servers are separate processes, as an agent harness starts them: each attaches to the
session with its own replica of the live document, and writes the same client copy as the session
(``<SEER_OUTPUTS_DIR>/<sandbox_id>/<name>.ipynb``), found through the sandbox's record in the
config's ``SEER_HOME``.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
from _live_kit import BrowserLikeClient, check_kept, in_lockstep
from _mcp_client import McpClient, text, texts


def mcp_clients(config: dict[str, Any], count: int) -> list[McpClient]:
    """``count`` MCP clients, each on a server started from exactly ``config`` (its command, its
    args, only its env: the SDK adds no more than HOME, PATH, ... as any stdio client does)."""
    assert config["type"] == "stdio", config
    clients: list[McpClient] = []
    try:
        for _ in range(count):
            clients.append(McpClient(list(config["args"]), dict(config["env"]), command=config["command"]))
    except BaseException:
        for client in clients:
            client.close()
        raise
    return clients


def session_and_mcp_writers(session: Any, sandbox: Any, rounds: int) -> None:
    """``rounds`` rounds in which the session, two MCP clients and a browser-like client all start
    at once (a barrier each round): the three run ``print('<writer>-<round>')``, the browser adds a
    markdown cell. Then: every cell, once, in execution order, with its output, in the sandbox's
    ``.ipynb`` and in the client copy; the browser's replica holds the same cells."""
    assert session.live is not None, "the sandbox's Jupyter server has no live document"
    assert session.local_path is not None, "the session keeps no client copy"
    assert session.local_path.parent == sandbox.outputs_dir, (session.local_path, sandbox.outputs_dir)
    clients = mcp_clients(session.mcp_config, 2)
    browser: BrowserLikeClient | None = None
    try:
        browser = BrowserLikeClient(session.jupyter_url, session.notebook_path)
        for n, client in enumerate(clients, 1):  # each runs in the configured session, unattached
            ran = client.call("execute_code", {"code": f"print('mcp{n}-ready')"})
            assert not ran.is_error and texts(ran)[0].strip() == f"mcp{n}-ready", (text(ran), client.stderr)
        # The servers found the sandbox's record (SEER_HOME is in the config): their client copy is
        # the session's, not one under a folder named after the Jupyter server's address.
        ready = {f"print('mcp{n}-ready')" for n in (1, 2)}
        deadline = time.monotonic() + 30
        while not ready <= _sources(session.local_path) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready <= _sources(session.local_path), _sources(session.local_path)
        port = urllib.parse.urlsplit(session.client.url).port
        stray = sandbox.outputs_dir.parent / f"jupyter-127-0-0-1-{port}"
        assert not stray.exists(), f"an MCP server kept its copy apart: {sorted(stray.iterdir())}"

        def on_session(code: str) -> str:
            result = session.exec(code)
            assert result.ok, result
            return str(result.stdout)

        def on_client(client: McpClient) -> Callable[[str], str]:
            def run(code: str) -> str:
                result = client.call("execute_code", {"code": code})
                assert not result.is_error, (text(result), client.stderr)
                return texts(result)[0]  # what the cell printed (then a line saying where it ran)

            return run

        writers: list[tuple[str, Callable[[str], str]]] = [
            ("py", on_session),
            ("mcp1", on_client(clients[0])),
            ("mcp2", on_client(clients[1])),
        ]

        def writer(tag: str, run: Callable[[str], str]) -> Callable[[int], None]:
            def write(r: int) -> None:
                printed = run(f"print('{tag}-{r}')")
                assert printed.strip() == f"{tag}-{r}", (tag, r, printed)

            return write

        def type_in_browser(r: int) -> None:
            assert browser is not None
            browser.add_markdown(f"typed-{r}")

        failures = in_lockstep(rounds, [*(writer(*w) for w in writers), type_in_browser])
        assert not failures, failures
    finally:
        for client in clients:  # a server writes its client copy as each cell completes, then exits
            client.close()
    try:
        session.flush()  # the session's replica holds every writer's cells: the client copy too
        expected_code = {f"print('{tag}-{r}')" for tag, _ in writers for r in range(rounds)} | ready
        expected_typed = {f"typed-{r}" for r in range(rounds)}
        on_disk, client_copy = check_kept(sandbox, session, browser, expected_code, expected_typed)
        assert [c.source for c in client_copy.cells] == [c.source for c in on_disk.cells]
    finally:
        browser.close()


def _sources(path: Path) -> set[str]:
    try:
        return {c.source for c in nbformat.reads(path.read_text(), as_version=4).cells}
    except (OSError, ValueError):
        return set()

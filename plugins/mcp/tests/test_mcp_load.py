"""Parallel first calls to a fresh notebook MCP server (#23 item 5): the default session is
attached once, and every call either runs its cell or is told at once that the session is busy;
no two cells overlap."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator

import anyio
import mcp.types as types
import pytest

pytest.importorskip("jupyter_server")
pytest.importorskip("mcp")
pytest.importorskip("seer_mcp")

from _mcp_client import McpClient, text
from _notebook_kit import local_sandbox
from seer.execution import create_notebook_session
from seer.notebook import NotebookSession

pytestmark = pytest.mark.e2e

#: Parallel calls, as the issue measured them.
CALLS = 50
#: Every call is answered within this (attach once, then a cell of CELL_SECONDS and refusals).
BOUND = 60.0
CELL_SECONDS = 0.3
#: Each cell records when it started and ended (kernel clock) in ``_log``.
CELL = (
    "import time as _time\n"
    "_start = _time.time()\n"
    f"_time.sleep({CELL_SECONDS})\n"
    "_log.append((_start, _time.time()))\n"
    "len(_log)"
)


@pytest.fixture
def session() -> Iterator[NotebookSession]:
    with local_sandbox(timeout=600) as box, create_notebook_session(box, name="load", outputs_dir=False) as s:
        yield s


def test_fifty_parallel_first_calls_each_run_or_answer_busy_one_cell_at_a_time(
    session: NotebookSession,
) -> None:
    session.exec("_log = []")
    config = session.mcp_config
    answers: list[tuple[float, types.CallToolResult]] = []
    with McpClient(config["args"], config["env"], command=config["command"]) as c:

        async def one() -> None:
            result = await c.session.call_tool("execute_code", {"code": CELL}, BOUND + 30)
            answers.append((time.monotonic(), result))

        async def all_at_once() -> None:
            async with anyio.create_task_group() as tg:
                for _ in range(CALLS):
                    tg.start_soon(one)

        started = time.monotonic()
        c.portal.call(all_at_once)
        sessions = text(c.call("list_sessions"))
    assert len(answers) == CALLS
    ran = [r for _, r in answers if not r.is_error]
    busy = [r for _, r in answers if r.is_error]
    for result in busy:
        assert "is still running a cell" in text(result) and "get_cell_result" in text(result), text(result)
    assert ran, "no call ran its cell"
    assert max(t for t, _ in answers) - started < BOUND
    # Each cell that ran says which one it was; the kernel's log has exactly those, one at a time.
    assert sorted(int(r.content[0].text) for r in ran) == list(range(1, len(ran) + 1))
    # One session attached, once; the notebook (in the sandbox, and the client copy the server
    # kept) holds each cell that ran, once.
    assert sessions.count('"session_id"') == 1, sessions
    sandbox = session.sandbox
    assert sandbox is not None
    for notebook in (
        sandbox.read_file("notebooks/load.ipynb"),
        (sandbox.outputs_dir / "load.ipynb").read_text(),
    ):
        sources = ["".join(c["source"]) for c in json.loads(notebook)["cells"]]
        assert sources.count(CELL) == len(ran), sources
    intervals = eval(session.exec("_log", hidden=True).result or "[]")
    assert len(intervals) == len(ran)
    for (_, end), (start, _) in itertools.pairwise(intervals):
        assert start >= end, f"two cells overlapped: {intervals}"


def test_oversized_code_is_refused_with_its_limit(session: NotebookSession) -> None:
    from seer_mcp.notebook import MAX_CODE

    config = session.mcp_config
    sandbox = session.sandbox
    assert sandbox is not None
    big = "x = 1\n" + "#" * 10_000_000
    with McpClient(config["args"], config["env"], command=config["command"]) as c:
        refused = c.call("execute_code", {"code": big})
        assert refused.is_error, text(refused)
        assert f"a cell takes at most {MAX_CODE:,}" in text(refused) and "Nothing ran" in text(refused)
        assert "Broken pipe" not in text(refused)
        assert text(c.call("execute_code", {"code": "1 + 1"})).startswith("2")
    cells = json.loads((sandbox.outputs_dir / "load.ipynb").read_text())["cells"]
    assert ["".join(c["source"]) for c in cells] == ["1 + 1"]

"""The notebook MCP server's reading and editing tools (``seer_mcp.notebook_tools``), called with the
mcp SDK's own client over stdio, against a real notebook session on the local provider.

Each test switches the session to a notebook of its own (``open_notebook`` with a file made here),
drives the tools, and reads the notebook file in the sandbox back with nbformat after every edit.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jupyter_server")
pytest.importorskip("websocket")
pytest.importorskip("mcp")
pytest.importorskip("seer_mcp")

import mcp.types as types
from _images import tiny_png
from _mcp_client import McpClient, server_env, text, texts
from mcp.shared.exceptions import MCPError
from seer import Sandbox
from seer.execution import create_notebook_session
from seer.notebook import NotebookSession

nbformat = pytest.importorskip("nbformat")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SERVER = ["-m", "seer_mcp.notebook"]
#: The tools seer_mcp.notebook_tools adds to the notebook server.
NOTEBOOK_EDITING_TOOLS = {
    "read_notebook",
    "read_cell",
    "insert_cell",
    "delete_cell",
    "move_cell",
    "overwrite_cell_source",
    "execute_cell",
    "clear_outputs",
    "list_notebooks",
    "open_notebook",
}


# ``sandbox`` and ``setup_session``: conftest.py
@pytest.fixture(scope="module")
def client() -> Iterator[McpClient]:
    with McpClient(SERVER, server_env({"SEER_MCP_PROGRESS_INTERVAL": "1"})) as c:
        yield c


@pytest.fixture(scope="module")
def sid(client: McpClient, setup_session: NotebookSession) -> str:
    args = {"session_id": setup_session.session_id, "jupyter_url": setup_session.jupyter_url}
    result = client.call("attach_to_session", args)
    assert not result.is_error, text(result)
    return setup_session.session_id


def code_cell(source: str, outputs: list[dict[str, Any]] | None = None, count: int | None = None) -> Any:
    return nbformat.v4.new_code_cell(source, outputs=outputs or [], execution_count=count)


def opened(client: McpClient, sid: str, tmp_path: Path, name: str, cells: list[Any]) -> str:
    """Switch the session to a new notebook holding ``cells``; its path in the sandbox."""
    local = tmp_path / f"{name}.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), str(local))
    result = client.call("open_notebook", {"session_id": sid, "path": str(local)})
    assert not result.is_error, text(result)
    assert f"copied from {local}" in text(result)
    return text(result).split("now records in notebook ")[1].split(" ")[0]


def on_disk(sandbox: Sandbox, path: str) -> Any:
    """The notebook file in the sandbox, validated (read again if caught mid-write)."""
    for _ in range(100):
        try:
            nb = nbformat.reads(sandbox.read_file(path), as_version=4)
            nbformat.validate(nb)
            return nb
        except (ValueError, nbformat.ValidationError):
            time.sleep(0.02)
    raise AssertionError(f"{path} never held a valid notebook")


def eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    """The server writes the notebook a moment after each edit: poll for it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except FileNotFoundError:  # a new notebook, not written yet
            pass
        if time.monotonic() > deadline:
            raise AssertionError("the notebook file never showed the edit")
        time.sleep(0.05)


def sources(sandbox: Sandbox, path: str) -> list[str]:
    return [c.source for c in on_disk(sandbox, path).cells]


def ok(client: McpClient, tool: str, **args: Any) -> types.CallToolResult:
    result = client.call(tool, args)
    assert not result.is_error, (tool, args, text(result))
    return result


# --- the tools ------------------------------------------------------------------------------


def test_the_tools_are_listed_with_descriptions_and_schemas(client: McpClient) -> None:
    tools = {t.name: t for t in client.tools()}
    assert set(tools) >= NOTEBOOK_EDITING_TOOLS
    for name in NOTEBOOK_EDITING_TOOLS:
        assert len(tools[name].description or "") > 80, name
    schema = tools["insert_cell"].input_schema
    assert schema["required"] == ["session_id", "cell_index", "source"]
    assert schema["properties"]["cell_index"]["type"] == "integer"
    assert schema["properties"]["cell_type"]["enum"] == ["code", "markdown"]
    assert tools["move_cell"].input_schema["required"] == ["session_id", "cell_index", "to_index"]
    assert (
        "clear every cell" in tools["clear_outputs"].input_schema["properties"]["cell_index"]["description"]
    )
    assert "ABSOLUTE path" in tools["open_notebook"].input_schema["properties"]["path"]["description"]


def test_read_notebook_and_read_cell(client: McpClient, sid: str, sandbox: Sandbox, tmp_path: Path) -> None:
    png = tiny_png(2, 2, b"\x00\xff\x00")
    long_text = "".join(f"line {i}\n" for i in range(200))
    cells = [
        nbformat.v4.new_markdown_cell("# Notes\nwhat we found"),
        code_cell(
            "print(long)\nshow(png)",
            [
                nbformat.v4.new_output("stream", name="stdout", text=long_text),
                nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(png).decode()}),
            ],
            3,
        ),
        code_cell(
            "1 / 0",
            [
                nbformat.v4.new_output(
                    "error",
                    ename="ZeroDivisionError",
                    evalue="division by zero",
                    traceback=["\x1b[31mTraceback\x1b[0m", "ZeroDivisionError: division by zero"],
                )
            ],
            4,
        ),
        code_cell("never_run()"),
    ]
    path = opened(client, sid, tmp_path, "reading", cells)

    whole = text(ok(client, "read_notebook", session_id=sid))
    assert whole.startswith(f"{path}: 4 cells; cells 0 to 3:")
    assert "--- cell 0: markdown ---\n# Notes\nwhat we found" in whole
    assert "--- cell 1: code, In [3] ---\nprint(long)\nshow(png)\n>>> outputs:\nline 0\n" in whole
    assert "more characters: read_cell(cell_index=1)]" in whole and "line 199" not in whole
    assert "[displayed: image/png; read_cell shows them]" in whole
    assert "--- cell 2: code, In [4] ---\n1 / 0\n>>> outputs:\nZeroDivisionError: division by zero" in whole
    assert "--- cell 3: code, not run ---\nnever_run()" in whole

    part = text(ok(client, "read_notebook", session_id=sid, start_index=2, end_index=3))
    assert "cells 2 to 2:" in part and "1 / 0" in part and "never_run" not in part and "# Notes" not in part
    assert "start_index=3) reads on" in part

    one = ok(client, "read_cell", session_id=sid, cell_index=1)
    kinds = [c.type for c in one.content]
    assert kinds == ["text", "text", "text", "image"]
    assert texts(one)[0] == "--- cell 1: code, In [3] ---\nprint(long)\nshow(png)"
    assert "line 199" in texts(one)[2]
    image = one.content[3]
    assert isinstance(image, types.ImageContent) and base64.b64decode(image.data) == png
    failed = ok(client, "read_cell", session_id=sid, cell_index=2)
    assert "ZeroDivisionError: division by zero" in text(failed) and "\x1b[" not in text(failed)
    assert texts(ok(client, "read_cell", session_id=sid, cell_index=0)) == [
        "--- cell 0: markdown ---\n# Notes\nwhat we found"
    ]
    assert texts(ok(client, "read_cell", session_id=sid, cell_index=3))[1] == "(no outputs)"


def test_edit_tools_change_the_notebook_file(
    client: McpClient, sid: str, sandbox: Sandbox, tmp_path: Path
) -> None:
    path = opened(client, sid, tmp_path, "editing", [])
    ok(client, "execute_code", session_id=sid, code="x = 1\nx")

    inserted = ok(client, "insert_cell", session_id=sid, cell_index=0, source="# Title", cell_type="markdown")
    assert "Inserted a markdown cell at index 0" in text(inserted) and "moved down" in text(inserted)
    ran = ok(client, "insert_cell", session_id=sid, cell_index=1, source="y = x + 1\ny", run=True)
    assert texts(ran)[0].startswith("Inserted a code cell at index 1") and texts(ran)[1] == "2"
    assert texts(ran)[-1].startswith("[cell 1, In [")
    later = ok(client, "insert_cell", session_id=sid, cell_index=3, source="z = 0")
    assert "It has not run: execute_cell(" in text(later) and "cell_index=3" in text(later)
    eventually(lambda: sources(sandbox, path) == ["# Title", "y = x + 1\ny", "x = 1\nx", "z = 0"])
    cell = on_disk(sandbox, path).cells[1]
    assert cell.outputs[-1]["data"]["text/plain"] == "2" and cell.execution_count

    deleted = ok(client, "delete_cell", session_id=sid, cell_index=0)
    assert "Deleted cell 0 (markdown)" in text(deleted) and text(deleted).endswith("# Title")
    eventually(lambda: sources(sandbox, path) == ["y = x + 1\ny", "x = 1\nx", "z = 0"])

    ok(client, "move_cell", session_id=sid, cell_index=1, to_index=0)
    eventually(lambda: sources(sandbox, path) == ["x = 1\nx", "y = x + 1\ny", "z = 0"])
    ok(client, "move_cell", session_id=sid, cell_index=0, to_index=2)
    eventually(lambda: sources(sandbox, path) == ["y = x + 1\ny", "z = 0", "x = 1\nx"])

    # Overwrite without running: the stale outputs go; with run: new ones, in place.
    quiet = ok(client, "overwrite_cell_source", session_id=sid, cell_index=0, source="y = x + 10\ny")
    assert "It has not run" in text(quiet)
    eventually(lambda: sources(sandbox, path)[0] == "y = x + 10\ny")
    assert on_disk(sandbox, path).cells[0].outputs == []
    assert texts(ok(client, "execute_cell", session_id=sid, cell_index=1))[0] == "(no output)"  # z = 0
    loud = ok(client, "overwrite_cell_source", session_id=sid, cell_index=1, source="z += 5\nz", run=True)
    assert texts(loud)[0] == "5" and texts(loud)[-1].startswith("[cell 1, In [")
    eventually(
        lambda: sources(sandbox, path)[1] == "z += 5\nz" and bool(on_disk(sandbox, path).cells[1].outputs)
    )
    assert on_disk(sandbox, path).cells[1].outputs[-1]["data"]["text/plain"] == "5"

    # Re-run an unchanged cell: its state moves on, its outputs are replaced where it is.
    again = ok(client, "execute_cell", session_id=sid, cell_index=1)
    assert texts(again)[0] == "10"
    eventually(lambda: on_disk(sandbox, path).cells[1].outputs[-1]["data"]["text/plain"] == "10")
    assert len(on_disk(sandbox, path).cells) == 3

    ok(client, "clear_outputs", session_id=sid, cell_index=1)
    eventually(lambda: on_disk(sandbox, path).cells[1].outputs == [])
    assert on_disk(sandbox, path).cells[2].outputs != []
    cleared = ok(client, "clear_outputs", session_id=sid)
    assert "every cell" in text(cleared)
    eventually(
        lambda: all(c.outputs == [] and c.execution_count is None for c in on_disk(sandbox, path).cells)
    )
    assert sources(sandbox, path) == ["y = x + 10\ny", "z += 5\nz", "x = 1\nx"]


def test_list_and_open_notebooks(
    client: McpClient, sid: str, sandbox: Sandbox, setup_session: NotebookSession, tmp_path: Path
) -> None:
    ok(client, "execute_code", session_id=sid, code="carried = 'over'")
    before = setup_session.client.call("GET", f"/api/sessions/{sid}")["path"]
    old = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# Earlier"), code_cell("base = 40", count=9)]
    )
    sandbox.write_file("notebooks/earlier.ipynb", nbformat.writes(old))

    listed = text(ok(client, "list_notebooks", session_id=sid))
    assert f"{before}  (modified" in listed and "<- this session's notebook" in listed
    assert "notebooks/earlier.ipynb  (modified" in listed
    assert "notebooks/" in text(ok(client, "list_notebooks", session_id=sid, directory="notebooks"))

    # In this session: the kernel keeps its variables; the opened cells have not run.
    result = ok(client, "open_notebook", session_id=sid, path="notebooks/earlier.ipynb")
    assert "now records in notebook notebooks/earlier.ipynb: 2 cells (1 code, 1 other)" in text(result)
    assert "execute_cell" in text(result)
    assert texts(ok(client, "execute_code", session_id=sid, code="carried"))[0] == "'over'"
    assert texts(ok(client, "execute_cell", session_id=sid, cell_index=1))[-1].startswith("[cell 1, In [")
    assert texts(ok(client, "execute_code", session_id=sid, code="base + 2"))[0] == "42"
    eventually(
        lambda: (
            sources(sandbox, "notebooks/earlier.ipynb") == ["# Earlier", "base = 40", "carried", "base + 2"]
        )
    )
    mine = text(ok(client, "list_notebooks", session_id=sid)).splitlines()
    assert "notebooks/earlier.ipynb  (modified" in next(line for line in mine if "<- this session's" in line)
    # The notebook it recorded in before stays, and shows as another session's no more.
    assert setup_session.client.call("GET", f"/api/sessions/{sid}")["path"] == "notebooks/earlier.ipynb"

    # In a new session: a fresh kernel on the same server, continuing another notebook.
    sandbox.write_file(
        "notebooks/resume.ipynb", nbformat.writes(nbformat.v4.new_notebook(cells=[code_cell("resumed = 1")]))
    )
    started = ok(client, "open_notebook", session_id=sid, path="notebooks/resume.ipynb", new_session=True)
    body = text(started)
    assert body.startswith("Started session ") and "No models are pre-loaded" in body
    new_sid = body.split("Started session ")[1].split(" ")[0]
    assert new_sid != sid
    fresh = ok(client, "execute_code", session_id=new_sid, code="'carried' in globals()")
    assert texts(fresh)[0] == "False"
    ok(client, "execute_cell", session_id=new_sid, cell_index=0)
    ok(client, "execute_code", session_id=new_sid, code="resumed + 1")
    resumed = ["resumed = 1", "'carried' in globals()", "resumed + 1"]
    eventually(lambda: sources(sandbox, "notebooks/resume.ipynb") == resumed)
    # What the server adds to cells it reads (a trust mark) is not written back.
    assert all("trusted" not in c.metadata for c in on_disk(sandbox, "notebooks/resume.ipynb").cells)
    assert f"<- open in session {new_sid}" in text(ok(client, "list_notebooks", session_id=sid))
    ok(client, "shutdown_session", session_id=new_sid)


# --- bad input ------------------------------------------------------------------------------


def test_bad_input_for_each_tool_is_a_clear_error_and_changes_nothing(
    client: McpClient, sid: str, sandbox: Sandbox, setup_session: NotebookSession, tmp_path: Path
) -> None:
    path = opened(client, sid, tmp_path, "bad", [code_cell("a = 1"), nbformat.v4.new_markdown_cell("note")])
    not_json = tmp_path / "broken.ipynb"
    not_json.write_text("{not json")
    other = create_notebook_session(sandbox, name="someone-else", outputs_dir=False)
    hint = "read_notebook(session_id="
    cases: list[tuple[str, dict[str, Any], list[str]]] = [
        ("read_notebook", {"start_index": -1}, ["start_index -1 is negative"]),
        ("read_notebook", {"start_index": 7}, ["start_index 7 is out of range", "has 2 cells (0 to 1)"]),
        (
            "read_notebook",
            {"start_index": 1, "end_index": 1},
            ["end_index 1 must be greater than start_index 1"],
        ),
        ("read_notebook", {"end_index": -2}, ["end_index -2 is negative"]),
        ("read_notebook", {"start_index": 0.5}, ["start_index", "valid integer"]),
        (
            "read_cell",
            {"cell_index": -1},
            ["cell index -1 is negative", "has 2 cells (indexes 0 to 1)", hint],
        ),
        ("read_cell", {"cell_index": 2}, ["cell index 2 is out of range", hint]),
        ("read_cell", {"cell_index": "first"}, ["cell_index", "valid integer"]),
        ("read_cell", {"cell_index": True}, ["cell_index", "not a boolean"]),
        ("read_cell", {"cell_index": 1.5}, ["cell_index", "fractional part"]),
        (
            "read_cell",
            {},
            ["missing argument 'cell_index'", "Signature: read_cell(session_id: str, cell_index: int)"],
        ),
        ("insert_cell", {"cell_index": 3, "source": "x"}, ["cell index 3 is out of range", "2 appends"]),
        ("insert_cell", {"cell_index": -1, "source": "x"}, ["cell index -1 is negative"]),
        (
            "insert_cell",
            {"cell_index": 0, "source": "x", "cell_type": "python"},
            ["cell_type", "'code' or 'markdown'"],
        ),
        ("insert_cell", {"cell_index": 0}, ["missing argument 'source'", "Signature: insert_cell("]),
        ("delete_cell", {"cell_index": 2}, ["cell index 2 is out of range", hint]),
        ("delete_cell", {"cell_index": -1}, ["cell index -1 is negative"]),
        ("move_cell", {"cell_index": 0, "to_index": 2}, ["target index 2 is out of range"]),
        ("move_cell", {"cell_index": -1, "to_index": 0}, ["cell index -1 is negative"]),
        ("move_cell", {"cell_index": 0, "to_index": "end"}, ["to_index", "valid integer"]),
        ("overwrite_cell_source", {"cell_index": 5, "source": "x"}, ["cell index 5 is out of range"]),
        (
            "overwrite_cell_source",
            {"cell_index": -1, "source": "x", "run": True},
            ["cell index -1 is negative"],
        ),
        (
            "execute_cell",
            {"cell_index": 1},
            ["Cell 1 is a markdown cell: only code cells run", "overwrite_cell_source"],
        ),
        ("execute_cell", {"cell_index": 9}, ["cell index 9 is out of range"]),
        ("clear_outputs", {"cell_index": 9}, ["cell index 9 is out of range"]),
        ("clear_outputs", {"cell_index": -2}, ["cell index -2 is negative"]),
        ("list_notebooks", {"directory": "no-such-folder"}, ["'no-such-folder' is not a folder"]),
        (
            "open_notebook",
            {"path": "notebooks/none.ipynb"},
            ["no notebook 'notebooks/none.ipynb'", "list_notebooks"],
        ),
        ("open_notebook", {"path": "../up.ipynb"}, ["without '..'", "absolute path"]),
        ("open_notebook", {"path": "notes.txt"}, ["does not name a notebook"]),
        ("open_notebook", {"path": str(tmp_path / "missing.ipynb")}, ["no file", "on this machine"]),
        ("open_notebook", {"path": str(not_json)}, ["is not a notebook: it is not JSON"]),
        ("open_notebook", {"path": str(tmp_path / "file.txt")}, ["is not a .ipynb file"]),
        ("open_notebook", {"path": other.notebook_path}, [f"is the notebook of session {other.session_id}"]),
        (
            "open_notebook",
            {"path": other.notebook_path, "new_session": True},
            [f"is the notebook of session {other.session_id}", "attach_to_session"],
        ),
    ]
    try:
        before = on_disk(sandbox, path)
        for tool, args, needles in cases:
            result = client.call(tool, {"session_id": sid, **args})
            assert result.is_error, (tool, args, text(result))
            for needle in needles:
                assert needle in text(result), (tool, args, text(result))
            assert setup_session.client.call("GET", f"/api/sessions/{sid}")["path"] == path
        unknown = client.call("read_notebook", {"session_id": "nope"})
        assert unknown.is_error and "Unknown session_id 'nope'" in text(unknown)
        time.sleep(0.5)  # a write the server wrongly made would have landed by now
        assert on_disk(sandbox, path) == before
    finally:
        other.shutdown()

    # While a cell runs, edits are refused (they would move the cell it is recorded into); reads work.
    with pytest.raises(MCPError):
        client.call(
            "execute_code", {"session_id": sid, "code": "import time\ntime.sleep(3)\n'slept'"}, timeout=0.5
        )
    for tool, args in [
        ("insert_cell", {"cell_index": 0, "source": "x"}),
        ("delete_cell", {"cell_index": 0}),
        ("move_cell", {"cell_index": 0, "to_index": 1}),
        ("overwrite_cell_source", {"cell_index": 0, "source": "x"}),
        ("execute_cell", {"cell_index": 0}),
        ("clear_outputs", {}),
        ("open_notebook", {"path": "notebooks/earlier.ipynb"}),
    ]:
        busy = client.call(tool, {"session_id": sid, **args})
        assert busy.is_error and "still running a cell" in text(busy), (tool, text(busy))
        assert "get_cell_result" in text(busy)
    assert "--- cell 0: code" in text(ok(client, "read_notebook", session_id=sid))
    assert texts(ok(client, "get_cell_result", session_id=sid, wait_seconds=30))[0] == "'slept'"
    eventually(lambda: sources(sandbox, path) == ["a = 1", "note", "import time\ntime.sleep(3)\n'slept'"])

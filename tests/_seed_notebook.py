"""Shared by the seed 004 notebook-flow tests of the remote providers (ssh, runpod, modal; issue #22):
after the setup script has exited and a Python handle has run cells on the session it printed,
the agent's notebook MCP server attaches as the seed tells it (``attach_to_session`` with the
printed ``session_id`` and ``jupyter_url``), runs a cell and writes a note, the Python handle runs
one more, and ``seer down`` (``Sandbox.attach(id).terminate()``) keeps the notebook: every
writer's cell, in order, in the sandbox's ``.ipynb`` and in the client copy, and no second copy
written beside it.
"""

from __future__ import annotations

import json
from typing import Any

#: The notebook MCP server as an agent's harness starts it for the seed: no session configured.
SERVER = ["-m", "seer_mcp.notebook"]


def agent_then_teardown_keeps_every_cell(printed: dict[str, str], sandbox_id: str, session: Any) -> None:
    """``session``: the test's handle on the printed session (attached, cells run). Ends with the
    sandbox terminated through its record, as ``seer down`` does."""
    # Imported here, not at the top: `scripts/matrix --quick` collects the providers' example
    # modules in a venv holding core and one provider, without nbformat's extra or the MCP SDK.
    import nbformat
    from _mcp_client import McpClient, server_env, text, texts
    from seer import Sandbox

    before = [c["source"] for c in session.cells]
    assert before, "the test ran no cell before the agent"
    with McpClient(SERVER, server_env()) as agent:
        attached = agent.call(
            "attach_to_session",
            {"session_id": printed["session_id"], "jupyter_url": printed["jupyter_url"]},
        )
        assert not attached.is_error, (text(attached), agent.stderr)
        ran = agent.call("execute_code", {"code": "print('the agent was here')"})
        assert not ran.is_error and texts(ran)[0].strip() == "the agent was here", (text(ran), agent.stderr)
        noted = agent.call("add_markdown", {"markdown": "The agent's note."})
        assert not noted.is_error, (text(noted), agent.stderr)
    after = session.exec("print('after the agent')")
    assert after.ok and after.stdout == "after the agent\n", after
    expected = [*before, "print('the agent was here')", "The agent's note.", "print('after the agent')"]
    assert [c["source"] for c in session.cells] == expected
    session.detach()  # saves the sandbox's .ipynb from the live document, and lets go

    box = Sandbox.attach(sandbox_id)
    on_disk = nbformat.reads(box.read_file(session.notebook_path), as_version=4)
    assert [c.source for c in on_disk.cells] == expected, "the sandbox's .ipynb"
    folder = box.outputs_dir
    box.terminate()  # what `seer down <id>` does: the notebooks are copied, then the sandbox goes
    copy = folder / f"{session.name}.ipynb"
    assert copy.is_file(), sorted(p.name for p in folder.iterdir()) if folder.is_dir() else folder
    kept = nbformat.reads(copy.read_text(), as_version=4)
    assert [c.source for c in kept.cells] == expected, "the client copy after teardown"
    agent_cell = kept.cells[len(before)]
    printed_text = "".join(o.get("text", "") for o in agent_cell.outputs if o.output_type == "stream")
    assert printed_text == "the agent was here\n", json.dumps(agent_cell)
    # The one document: the sandbox's copy is the client's, so none was written beside it.
    beside = sorted(p.name for p in folder.glob(f"{session.name}.sandbox*.ipynb"))
    assert not beside, f"teardown kept a different notebook beside the client copy: {beside}"

"""The scripted agent run: seed 004's workflow played as an agent plays it, through the notebook MCP
server with the mcp SDK's own client.

The agent writes a setup script, runs it, parses its JSON, attaches, runs cells that use the
pre-loaded (tiny) model, documents with markdown, plots, and the notebook in the sandbox holds all
of it, in order.

The longer run plays what went wrong in an agent's trial: a ``restart_session`` on the setup
script's session, a long call the client abandoned and an MCP server restarted while that cell ran,
then ``seer down``; the client-side copy of the notebook, made by default, holds every cell with its
outputs, in the order the agent made them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _mcp_client import McpClient, server_env, text, texts
from _model_kit import MODEL_ID, tiny_dirs
from mcp.shared.exceptions import MCPError
from seer import Sandbox
from seer.notebook import JupyterClient
from seer.providers.local.provider import LocalProvider

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SETUP = """
from seer.environment import Sandbox, SandboxConfig, ExecutionMode, ModelConfig
from seer.workspace import Workspace
from seer.execution import create_notebook_session
import json

config = SandboxConfig(
    execution_mode=ExecutionMode.NOTEBOOK,
    gpu=None,
    models=[ModelConfig(name="seer-testing/tiny-llama")],
    python_packages=["torch", "transformers", "matplotlib"],
    timeout=900,
)
sandbox = Sandbox(config).start()
session = create_notebook_session(sandbox, Workspace())
print(json.dumps({
    "session_id": session.session_id,
    "jupyter_url": session.jupyter_url,
    "model_info": session.model_info_text,
}))
"""

CELL_USE_MODEL = """
import torch
inputs = tokenizer("the quick brown fox", return_tensors="pt").to(model.device)
with torch.no_grad():
    hidden = model(**inputs, output_hidden_states=True).hidden_states
norms = [float(h[0, -1].norm()) for h in hidden]
print(f"{type(model).__name__} with {len(hidden) - 1} layers; last-token norms {len(norms)}")
"""

CELL_PLOT = """
import matplotlib.pyplot as plt
plt.figure(figsize=(3, 2))
plt.plot(range(len(norms)), norms, marker="o")
plt.xlabel("layer"); plt.ylabel("norm"); plt.title("residual norm by layer")
plt.show()
print("plotted")
"""

MARKDOWN = "## Finding\nThe residual norm changes across layers."


def _run_setup_script(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str, env: dict[str, str]
) -> tuple[str, subprocess.CompletedProcess[str]]:
    """The agent writes the setup script and runs it (with the tiny model in an offline cache);
    ``(the sandbox it started, the finished process)``."""
    from seer.testing.tiny_model import install_in_hub_cache

    hf_home = tmp_path / "hf"
    install_in_hub_cache(tiny_dirs(tmp_path_factory, worker_id).model, MODEL_ID, cache_dir=hf_home / "hub")
    env = {**env, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"}
    (tmp_path / "setup.py").write_text(SETUP)
    before = {m.id for m in LocalProvider().list()}
    out = subprocess.run(
        [sys.executable, "setup.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    (sandbox_id,) = {m.id for m in LocalProvider().list()} - before
    return sandbox_id, out


def test_scripted_agent_run(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> None:
    # 1. The agent writes the setup script and runs it; it prints JSON and exits.
    sandbox_id, out = _run_setup_script(tmp_path, tmp_path_factory, worker_id, dict(os.environ))
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        printed = json.loads(out.stdout.strip().splitlines()[-1])
        assert f"**model** ({MODEL_ID})" in printed["model_info"]
        session = {"session_id": printed["session_id"]}

        # 2. It attaches with what the script printed, and works through the MCP tools.
        with McpClient(["-m", "seer_mcp.notebook"], server_env({"HF_HUB_OFFLINE": "1"})) as client:
            attached = client.call("attach_to_session", printed)
            assert not attached.is_error, texts(attached)
            used = client.call("execute_code", {**session, "code": CELL_USE_MODEL})
            assert not used.is_error, texts(used)
            assert texts(used)[0] == "LlamaForCausalLM with 2 layers; last-token norms 3"
            noted = client.call("add_markdown", {**session, "markdown": MARKDOWN})
            assert not noted.is_error, texts(noted)
            plotted = client.call("execute_code", {**session, "code": CELL_PLOT})
            assert not plotted.is_error, texts(plotted)
            assert [c.type for c in plotted.content].count("image") == 1
            assert "plotted" in texts(plotted)

        # 3. The notebook in the sandbox holds all of it, in order, with the plot's image.
        path = JupyterClient.from_url(printed["jupyter_url"]).call(
            "GET", f"/api/sessions/{printed['session_id']}"
        )["path"]
        notebook = json.loads(Sandbox.attach(sandbox_id).read_file(path))
        cells = [(c["cell_type"], "".join(c["source"])) for c in notebook["cells"]]
        assert cells == [
            ("code", CELL_USE_MODEL),
            ("markdown", MARKDOWN),
            ("code", CELL_PLOT),
        ], cells
        assert "LlamaForCausalLM" in json.dumps(notebook["cells"][0]["outputs"])
        assert any("image/png" in o.get("data", {}) for o in notebook["cells"][2]["outputs"])
        assert "tiny-llama" not in "".join(src for _, src in cells), "model loading cells stay hidden"
    finally:
        LocalProvider().terminate(sandbox_id)


def _long_cell(flags: Path) -> str:
    """Prints a line, waits for the test (the MCP server is restarted meanwhile), prints another
    while no server is connected, waits again, prints a last one: the output spans two servers."""
    return (
        "import os, time\n"
        "def wait_for(name):\n"
        "    deadline = time.monotonic() + 120\n"
        f"    while not os.path.exists(os.path.join({str(flags)!r}, name)) and time.monotonic() < deadline:\n"
        "        time.sleep(0.05)\n"
        "print('step 1/3', flush=True)\n"
        "wait_for('server-gone')\n"
        "print('step 2/3', flush=True)\n"
        "wait_for('server-back')\n"
        "print('step 3/3', flush=True)\n"
        "'long done'"
    )


def _code_cells(notebook: dict) -> list[dict]:
    return [c for c in notebook["cells"] if c["cell_type"] == "code"]


def _stream(cell: dict) -> str:
    return "".join("".join(o["text"]) for o in cell["outputs"] if o["output_type"] == "stream")


def test_the_client_side_notebook_survives_restarts_and_seer_down(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> None:
    # No SEER_OUTPUTS_DIR anywhere: the record goes to ./seer-outputs/<sandbox_id>/ of the setup
    # script's directory, and the MCP servers (started elsewhere) find it through the sandbox's record.
    env = {k: v for k, v in os.environ.items() if k != "SEER_OUTPUTS_DIR"}
    mcp_env = {k: v for k, v in server_env({"HF_HUB_OFFLINE": "1"}).items() if k != "SEER_OUTPUTS_DIR"}
    flags = tmp_path / "flags"
    flags.mkdir()
    sandbox_id, out = _run_setup_script(tmp_path, tmp_path_factory, worker_id, env)
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        printed = json.loads(out.stdout.strip().splitlines()[-1])
        sid = printed["session_id"]
        session = {"session_id": sid}
        record = tmp_path / "seer-outputs" / sandbox_id

        with McpClient(["-m", "seer_mcp.notebook"], mcp_env) as client:
            attached = client.call("attach_to_session", printed)
            assert not attached.is_error, texts(attached)
            assert str(record) in text(attached)
            used = client.call("execute_code", {**session, "code": CELL_USE_MODEL})
            assert texts(used)[0] == "LlamaForCausalLM with 2 layers; last-token norms 3", texts(used)
            assert not client.call("add_markdown", {**session, "markdown": MARKDOWN}).is_error
            plotted = client.call("execute_code", {**session, "code": CELL_PLOT})
            assert [c.type for c in plotted.content].count("image") == 1, texts(plotted)

            # restart_session on the setup script's session: the models come back.
            restarted = client.call("restart_session", session)
            assert not restarted.is_error, text(restarted)
            assert f"**model** ({MODEL_ID})" in text(restarted)
            after = client.call("execute_code", {**session, "code": "print(type(model).__name__)"})
            assert texts(after)[0] == "LlamaForCausalLM", text(after)

            # A long call the client gives up on; the cell runs on.
            with pytest.raises(MCPError):
                client.call("execute_code", {**session, "code": _long_cell(flags)}, timeout=1.0)
        # The MCP server is gone (restarted by the agent's harness) while the cell still runs.
        (flags / "server-gone").touch()

        with McpClient(["-m", "seer_mcp.notebook"], mcp_env) as client:
            again = client.call("attach_to_session", printed)
            assert not again.is_error, text(again)
            assert "still running a cell started before this server attached" in text(again)
            pending = client.call("get_cell_result", {**session, "wait_seconds": 0.5})
            assert not pending.is_error and "still running" in text(pending)
            assert "step 1/3\nstep 2/3" in text(pending), text(pending)
            (flags / "server-back").touch()
            done = client.call("get_cell_result", {**session, "wait_seconds": 60})
            assert not done.is_error, text(done)
            assert texts(done)[0] == "step 1/3\nstep 2/3\nstep 3/3\n'long done'", texts(done)
            last = client.call("execute_code", {**session, "code": "6 * 7"})
            assert texts(last)[0] == "42" and not texts(last)[0].startswith("Note")
            assert not client.call("add_markdown", {**session, "markdown": "## Done"}).is_error

        down = subprocess.run(
            [sys.executable, "-m", "seer", "down", sandbox_id],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert down.returncode == 0, down.stderr

        # The client-side notebook holds every cell, with its outputs, in the agent's order.
        (copy,) = record.glob("*.ipynb")
        notebook = json.loads(copy.read_text())
        cells = [(c["cell_type"], "".join(c["source"])) for c in notebook["cells"]]
        assert cells == [
            ("code", CELL_USE_MODEL),
            ("markdown", MARKDOWN),
            ("code", CELL_PLOT),
            ("code", "print(type(model).__name__)"),
            ("code", _long_cell(flags)),
            ("code", "6 * 7"),
            ("markdown", "## Done"),
        ], cells
        code = _code_cells(notebook)
        assert "LlamaForCausalLM with 2 layers" in _stream(code[0])
        assert any("image/png" in o.get("data", {}) for o in code[1]["outputs"])
        assert _stream(code[2]) == "LlamaForCausalLM\n"
        assert _stream(code[3]) == "step 1/3\nstep 2/3\nstep 3/3\n"
        assert code[3]["outputs"][-1]["data"]["text/plain"] == "'long done'"
        assert code[4]["outputs"][0]["data"]["text/plain"] == "42"
        assert all(c["execution_count"] for c in code)
        assert not any("seer_running" in c["metadata"] for c in code)
    except BaseException:
        print(Sandbox.attach(sandbox_id).process_log("jupyter", lines=60))
        raise
    finally:
        LocalProvider().terminate(sandbox_id)

"""The scripted agent run: seed 004's workflow played as an agent plays it, through the notebook MCP
server with the mcp SDK's own client.

The agent writes a setup script, runs it, parses its JSON, attaches, runs cells that use the
pre-loaded (tiny) model, documents with markdown, plots, and the notebook in the sandbox holds all
of it, in order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _mcp_client import McpClient, server_env, texts
from _model_kit import MODEL_ID, tiny_dirs
from seer import Sandbox
from seer.notebook import JupyterClient
from seer.providers.local import LocalProvider

pytestmark = pytest.mark.slow

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


def test_scripted_agent_run(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> None:
    from seer.testing.tiny_model import install_in_hub_cache

    hf_home = tmp_path / "hf"
    install_in_hub_cache(tiny_dirs(tmp_path_factory, worker_id).model, MODEL_ID, cache_dir=hf_home / "hub")
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"}

    # 1. The agent writes the setup script and runs it; it prints JSON and exits.
    (tmp_path / "setup.py").write_text(SETUP)
    before = {m.id for m in LocalProvider().list()}
    out = subprocess.run(
        [sys.executable, "setup.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    (sandbox_id,) = {m.id for m in LocalProvider().list()} - before
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

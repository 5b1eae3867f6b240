"""Seed 002's complete scoped example, run as written but for its import paths (``interp_infra``
becomes ``seer``): serve ``interface.py`` as MCP, ``create_local_session``, then ``async for msg in
run_agent(session=..., mcp_servers=[tools], task=...)`` at the top level, as a notebook (or
``python -m asyncio``) runs it. The other changes are what this machine needs: the tiny offline
model for Gemma, ``gpu=None`` (no GPU here), and the model API: a fake of OpenAI's on 127.0.0.1
(``SEER_AGENT_RUNNER=openai``, since the seed names no runner) whose scripted agent calls the
interface's ``get_activations`` and answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _model_kit import MODEL_ID, tiny_dirs
from test_scoped import SEED_INTERFACE

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: The seed's main.py, verbatim but for the import paths.
SEED_MAIN = """\
# main.py
from seer.environment import ScopedSandbox, SandboxConfig, ModelConfig
from seer.workspace import Workspace
from seer.execution import create_local_session
from seer.harness import run_agent

# 1. Create scoped sandbox
sandbox = ScopedSandbox(SandboxConfig(
    gpu="A100",
    models=[ModelConfig(name="google/gemma-2-9b")],
))

# 2. Start and serve interface
sandbox.start()
tools = sandbox.serve("interface.py", expose_as="mcp")

# 3. Run agent with tools
session = create_local_session()
async for msg in run_agent(
    session=session,
    mcp_servers=[tools],
    task="Analyze model activations",
):
    print(msg)

# 4. Cleanup
sandbox.terminate()
"""

#: How a notebook runs a cell with top-level ``await``/``async for`` (IPython's way).
TOP_LEVEL_AWAIT = (
    "import ast, asyncio, sys\n"
    "source = open(sys.argv[1]).read()\n"
    "code = compile(source, sys.argv[1], 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)\n"
    "asyncio.run(eval(code, {'__name__': '__main__'}))\n"
)


def test_the_seeds_complete_scoped_example_runs(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> None:
    pytest.importorskip("seer_mcp", reason="seer[mcp] is not installed")
    pytest.importorskip("agents", reason="openai-agents is not installed")
    from seer.testing.model_api import Call, Say
    from seer.testing.tiny_model import install_in_hub_cache
    from seer_openai.testing import FakeOpenAI

    hf_home = tmp_path / "hf"
    install_in_hub_cache(tiny_dirs(tmp_path_factory, worker_id).model, MODEL_ID, cache_dir=hf_home / "hub")
    main = SEED_MAIN.replace('gpu="A100"', "gpu=None").replace('"google/gemma-2-9b"', f'"{MODEL_ID}"')
    assert main.count("seer.") == 4 and MODEL_ID in main
    (tmp_path / "main.py").write_text(main)
    (tmp_path / "interface.py").write_text(SEED_INTERFACE)
    script = [
        Call("get_activations", {"prompt": "The quick brown fox", "layer": 1}),
        Say("Layer 1 activations have 64 features per token."),
    ]
    with FakeOpenAI(script) as fake:
        env = {
            **os.environ,
            **fake.env(),
            "SEER_AGENT_RUNNER": "openai",
            "HF_HOME": str(hf_home),
            "HF_HUB_OFFLINE": "1",
            "SEER_OUTPUTS_DIR": str(tmp_path / "outputs"),
        }
        out = subprocess.run(
            [sys.executable, "-c", TOP_LEVEL_AWAIT, "main.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=280,
        )
    assert out.returncode == 0, out.stderr[-3000:]
    printed = out.stdout.splitlines()
    assert printed[-1] == "[final: answered] Layer 1 activations have 64 features per token.", printed
    assert any(line.startswith("[tool_call] ") and "get_activations(" in line for line in printed), printed
    # The interface's answer (run in the sandbox with the model) reached the model.
    answer = fake.requests[1].result()
    assert '"layer": 1' in answer and '"shape"' in answer, answer[:500]
    (transcript,) = (tmp_path / "outputs").glob("local-*/agent-runs/*.jsonl")
    kinds = [json.loads(line)["kind"] for line in transcript.read_text().splitlines()]
    assert kinds == ["run", "system", "user", "assistant", "tool_call", "tool_result", "assistant", "final"]

"""Shared by the agent runners' end-to-end tests (tests/test_harness_*.py): what a scripted agent
works on, and the script it plays.

One notebook sandbox with the tiny model pre-loaded and a skill in its workspace, and one scoped
sandbox serving a small interface as MCP tools, both for a test module. The script attaches to the
notebook session, runs a cell that uses ``model``, reads the notebook back, calls the interface's
tool, loads the skill and answers; :func:`check_run` checks each tool result reached the fake
model in the request after its call, the cells are in the notebook and the transcript holds every
step, with no secret in it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _model_kit import MODEL_ID, hf_home, tiny_dirs
from seer import Sandbox, SandboxConfig, ScopedSandbox, Workspace
from seer.testing.model_api import Call, ModelRequest, Say
from seer.workspace import Skill

INTERFACE = '''\
"""A small interface for the agent."""


@expose
def triple(x: int) -> int:
    """Three times x."""
    return 3 * x
'''

CELL = (
    "import torch\n"
    'inputs = tokenizer("the quick brown fox", return_tensors="pt")\n'
    "with torch.no_grad():\n"
    "    hidden = model(**inputs, output_hidden_states=True).hidden_states\n"
    'print(f"{type(model).__name__}: {len(hidden) - 1} layers")\n'
)
CELL_OUTPUT = "LlamaForCausalLM: 2 layers"
SKILL = Skill(
    "residual-probe",
    "How to probe the residual stream of a loaded model",
    "# Residual probe\n\nRun the model with output_hidden_states=True; marker SKILL-BODY-7731.\n",
)
ANSWER = "The tiny model has 2 layers; triple(14) is 42."


@dataclass
class Workbench:
    """What the scripted agent works on."""

    notebook: Any  # NotebookSession
    tools: dict[str, Any]  # the interface's MCP server config
    secrets: list[str]  # values that must not reach a transcript


@pytest.fixture(scope="module")
def workbench(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Workbench]:
    pytest.importorskip("seer_mcp", reason="seer[mcp] is not installed")
    from seer.execution import create_notebook_session
    from seer.testing.tiny_model import install_in_hub_cache

    dirs = tiny_dirs(tmp_path_factory, worker_id)
    interface = tmp_path_factory.mktemp("agent-interface") / "probe_tools.py"
    interface.write_text(INTERFACE)
    made: list[Sandbox] = []
    try:
        with hf_home(tmp_path_factory.mktemp("hf-agent")) as cache:
            install_in_hub_cache(dirs.model, MODEL_ID, cache_dir=cache)
            sandbox = Sandbox(
                SandboxConfig(
                    execution_mode="notebook",
                    models=[{"name": MODEL_ID}],
                    python_packages=["torch", "transformers"],
                    timeout=900,
                )
            )
            made.append(sandbox)
            sandbox.start()
            notebook = create_notebook_session(sandbox, Workspace(skills=[SKILL]), name="agent")
        scoped = ScopedSandbox(SandboxConfig(timeout=900))
        made.append(scoped)
        scoped.start()
        tools = scoped.serve(interface, expose_as="mcp")
        secrets = [tools["env"]["SEER_RPC_TOKEN"], notebook.jupyter_url.split("token=", 1)[1]]
        yield Workbench(notebook, tools, secrets)
    finally:
        for sandbox in made:
            sandbox.terminate()


def script(names: Callable[[str, str], str], session_id: str, load_skill: Call) -> list[Any]:
    """The agent's steps; ``names`` maps an MCP server and tool (``"notebook", "execute_code"``)
    to the runner's tool name; ``load_skill`` is the runner's way of loading :data:`SKILL`."""

    def session(tool: str, **args: Any) -> Call:
        return Call(names("notebook", tool), {"session_id": session_id, **args})

    def answer(request: ModelRequest) -> Say:
        return Say(ANSWER)

    return [
        session("attach_to_session"),
        session("execute_code", code=CELL),
        session("read_notebook"),
        Call(names("probe_tools", "triple"), {"x": 14}),
        load_skill,
        answer,
    ]


def check_run(run: Any, fake: Any, bench: Workbench) -> None:
    """Every step reached the fake, the notebook, and the transcript."""
    assert not fake.unknown, f"the SDK called what the fake does not implement: {fake.unknown}"
    assert run.final is not None and run.final.stop_reason == "answered", run.final
    assert run.final.text == ANSWER
    requests = fake.requests
    assert len(requests) == 6, [r.tool_results for r in requests]
    assert "Probe the model's layers" in requests[0].task
    assert SKILL.name in requests[0].system, "the skills are listed in the system prompt"
    # Each tool's answer is in the next request.
    assert bench.notebook.session_id in requests[1].result()
    assert CELL_OUTPUT in requests[2].result()
    assert "the quick brown fox" in requests[3].result(), "read_notebook shows the cell just run"
    assert "42" in requests[4].result()
    marker = "SKILL-BODY-7731"  # in the skill's body, not its description
    assert marker not in json.dumps(requests[4].body) and marker in json.dumps(requests[5].body)
    assert not requests[5].tool_results[0].is_error, requests[5].tool_results
    # The cell is in the notebook, with its output.
    mirror = Path(bench.notebook.local_path)
    cells = json.loads(mirror.read_text())["cells"]
    ran = [c for c in cells if c["cell_type"] == "code" and "".join(c["source"]) == CELL]
    assert ran and CELL_OUTPUT in json.dumps(ran[-1]["outputs"]), [c["source"] for c in cells]
    # The transcript: every step, in order, with no secret.
    lines = [json.loads(line) for line in run.transcript_path.read_text().splitlines()]
    kinds = [line["kind"] for line in lines]
    assert kinds[:3] == ["run", "system", "user"] and kinds[-1] == "final"
    calls = [line for line in lines if line["kind"] == "tool_call"]
    results = [line for line in lines if line["kind"] == "tool_result"]
    assert len(calls) == 5 and len(results) == 5, kinds
    assert [c["arguments"].get("code") for c in calls if "execute_code" in c["tool"]] == [CELL]
    assert all("duration" in r for r in results)
    assert any(CELL_OUTPUT in r["text"] for r in results)
    assert kinds.count("assistant") == 6
    markdown = run.markdown_path.read_text()
    assert "execute_code" in markdown and ANSWER in markdown
    for secret in bench.secrets:
        assert secret not in run.transcript_path.read_text() and secret not in markdown
    assert run.transcript_path.parent == Path(bench.notebook.sandbox.outputs_dir) / "agent-runs"

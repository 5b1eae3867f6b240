"""Seed 004's Examples 1-3, as shipped in examples/seed004/, run start to finish on the local
provider with the tiny offline models, leaving no sandbox behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "seed004"
pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _run(script: str, tmp_path: Path) -> list[str]:
    """Run an example in a fresh seer home and HF cache; its stdout lines. Nothing may be left
    running."""
    pytest.importorskip("torch")
    pytest.importorskip("seer_toolkit")
    env = {
        **os.environ,
        "SEER_HOME": str(tmp_path / "seer"),
        "HF_HOME": str(tmp_path / "hf"),
        "SEER_OUTPUTS_DIR": str(tmp_path / "outputs"),
    }
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    listing = subprocess.run(
        [sys.executable, "-m", "seer", "ls", "--json"], env=env, capture_output=True, text=True, check=True
    )
    # Only local sandboxes: other sandboxes may share the Docker engine.
    assert [s for s in json.loads(listing.stdout) if s["provider"] == "local"] == []
    return out.stdout.splitlines()


def test_example_1_steering_in_a_workspace_notebook(tmp_path: Path) -> None:
    lines = _run("steering_experiment.py", tmp_path)
    assert set(json.loads(lines[0])) == {"session_id", "jupyter_url"}
    assert "Model: LlamaForCausalLM on cpu" in lines
    assert any(line.startswith("Steered response: What do you think about this idea?") for line in lines)


def test_example_2_hidden_adapter_with_toolkit_files_and_methodology(tmp_path: Path) -> None:
    lines = _run("hidden_preference.py", tmp_path)
    printed = json.loads(lines[0])
    assert "**model** (hidden model)" in printed["model_info"]
    assert "tiny-llama-lora" not in lines[0]
    assert printed["methodology"].startswith("# Research methodology")
    assert printed["task"].startswith("# Task")
    shift = next(line for line in lines if line.startswith("activation shift: "))
    assert float(shift.split(": ")[1]) > 0  # the adapter changes the activations
    assert "replies differ: True" in lines or "replies differ: False" in lines


def test_example_3_scoped_sandbox_serving_toolkit_functions(tmp_path: Path) -> None:
    lines = _run("scoped_rpc.py", tmp_path)
    assert json.loads(lines[0]) == {"status": "ready", "mcp_servers": ["steering_tools"]}
    steer = json.loads(lines[1])["steer"]
    assert steer["logit_shift"] > 0 and isinstance(steer["steered"], str)
    lens = json.loads(lines[2])["lens"]
    assert [row["layer"] for row in lens] == [0, 1] and all(len(row["tokens"]) == 3 for row in lens)

"""The README's quickstart command really does seer's main job (issue: the quickstart uses the
offline tiny model): a notebook sandbox with the model pre-loaded, cells run, torn down."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_quickstart_runs_and_leaves_nothing_running(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    env = {**os.environ, "SEER_HOME": str(tmp_path / "seer"), "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "**model** (seer-testing/tiny-llama)" in out.stdout
    assert "generate -> new token ids [" in out.stdout
    assert "hidden states (count, last shape) -> 3 (1, " in out.stdout
    assert "status is now 'terminated'" in out.stdout
    listing = subprocess.run(
        [sys.executable, "-m", "seer", "ls", "--json"], env=env, capture_output=True, text=True, check=True
    )
    assert listing.stdout.strip() == "[]"

"""The import contracts in pyproject.toml hold, and CI and ``nox -s lint`` check them.

``lint-imports`` (import-linter) reads ``[tool.importlinter]``: no import cycles in core,
``seer.runtime`` (what runs in the sandbox) free of the client side, providers independent of
each other, core importing no plugin distribution. ``.ci/run`` runs it with ruff before any test,
so a violation fails CI; this test runs it too, so a plain pytest run catches one as well.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def test_ci_lints_before_the_tests() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    steps = [
        r"^\.venv/bin/ruff check \.",
        r"^\.venv/bin/ruff format --check \.",
        r"^\.venv/bin/lint-imports\b",
        r"^scripts/test\b",
    ]
    where = [re.search(step, ci, re.MULTILINE) for step in steps]
    assert all(where), [s for s, m in zip(steps, where, strict=True) if not m]
    positions = [m.start() for m in where if m]
    assert positions == sorted(positions), ".ci/run must lint before it runs scripts/test"
    assert "exit 1" in ci[positions[2] : positions[3]], "a lint failure must stop the run"


def test_nox_lint_runs_the_contracts() -> None:
    noxfile = (ROOT / "noxfile.py").read_text()
    lint = noxfile[noxfile.index("def lint(") :].split("\n@nox.session", 1)[0]
    assert '"lint-imports"' in lint and '"ruff", "check"' in lint


@pytest.mark.e2e
def test_contracts_are_kept() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint_imports is None:
        pytest.skip("import-linter is not installed (the lint dependency group)")
    result = subprocess.run(
        [lint_imports, "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"Contracts: (\d+) kept, 0 broken", result.stdout)

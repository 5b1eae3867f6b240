"""Setup progress on stderr, by default: a setup script run as its own process (as an agent runs
one) says what each step does on stderr while stdout holds only its JSON; ``start(quiet=True)``,
``SEER_QUIET=1`` and ``seer up --quiet`` silence it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from seer.progress import Progress
from seer.providers.local.provider import LocalProvider

pytestmark = pytest.mark.e2e

SETUP = """\
import json
from seer import Sandbox, SandboxConfig

sandbox = Sandbox(SandboxConfig(execution_mode="cli")).start({args})
print(json.dumps({{"sandbox_id": sandbox.sandbox_id}}))
"""


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[str, str, str]:
    """Run ``argv`` as its own process; return (sandbox id from its JSON, stdout, stderr), having
    terminated the sandbox it started."""
    out = subprocess.run(
        argv, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    sandbox_id = json.loads(out.stdout.strip().splitlines()[-1])["sandbox_id"]
    LocalProvider().terminate(sandbox_id)
    return sandbox_id, out.stdout, out.stderr


def _setup(tmp_path: Path, args: str = "", env: dict[str, str] | None = None) -> tuple[str, str]:
    script = tmp_path / "setup.py"
    script.write_text(SETUP.format(args=args))
    _, stdout, stderr = _run([sys.executable, str(script)], tmp_path, env)
    return stdout, stderr


def test_a_setup_script_reports_its_steps_on_stderr_by_default(tmp_path: Path) -> None:
    stdout, stderr = _setup(tmp_path)
    lines = stderr.splitlines()
    # each step when it starts and when it ends, in order, on stderr only
    start = lines.index("seer: Provisioning a sandbox on local ...")
    done = next(
        i for i, line in enumerate(lines) if line.startswith("seer: Provisioning a sandbox on local: done in")
    )
    assert start < done
    assert any(line.startswith("seer: Preparing cli mode: done in") for line in lines[done:])
    assert "seer:" not in stdout and len(stdout.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "env"),
    [("quiet=True", None), ("", {"SEER_QUIET": "1"})],
    ids=["start-quiet", "SEER_QUIET"],
)
def test_a_setup_script_is_silent_when_asked(tmp_path: Path, args: str, env: dict[str, str] | None) -> None:
    stdout, stderr = _setup(tmp_path, args, env)
    assert stderr == ""
    assert json.loads(stdout)["sandbox_id"].startswith("local-")


def test_seer_up_reports_progress_and_quiet_silences_it(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("execution_mode: cli\n")
    seer = [sys.executable, "-m", "seer", "up", str(config)]
    _, stdout, stderr = _run(seer, tmp_path)
    assert "seer: Provisioning a sandbox on local ..." in stderr and "seer:" not in stdout
    _, stdout, stderr = _run([*seer, "--quiet"], tmp_path)
    assert stderr == "" and json.loads(stdout)["status"] == "running"


@pytest.mark.unit
def test_a_step_shows_its_output_lines_without_flooding(capsys: pytest.CaptureFixture[str]) -> None:
    """Download and installer output shows under its step (on a pipe: the first line at once,
    then at most one line per UPDATE_INTERVAL), and a failed step says so."""
    progress = Progress()
    with progress.step("Fetching 1 model(s)"):
        for n in range(1000):
            progress.update(f"model: {n} MB downloaded")
    with pytest.raises(RuntimeError), progress.step("Cloning repo"):
        raise RuntimeError("no network")
    err = capsys.readouterr().err.splitlines()
    assert err[:2] == ["seer: Fetching 1 model(s) ...", "seer:   model: 0 MB downloaded"]
    assert err[2].startswith("seer: Fetching 1 model(s): done in")
    assert err[3] == "seer: Cloning repo ..." and err[4].startswith("seer: Cloning repo: failed in")
    assert len(err) == 5

"""``seer-core[testing]`` is all a third-party provider's repository needs for the conformance suite:
the toy provider, installed with it alone in a fresh virtual environment (no other seer package),
passes the whole suite through seer's pytest plugin (``pytest --pyargs seer.testing.suite
--seer-provider toy``), run outside this repository so none of its conftest files help."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from seer.testing.conformance import live_processes

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
WHEELS = Path("/opt/wheels")  # a local wheel house, where the machine has one


def _uv() -> list[str] | None:
    """How to run uv: ``$SEER_UV`` (.ci/run passes the one it found), ``uv`` on PATH, or this
    Python's ``-m uv``; None without one."""
    if os.environ.get("SEER_UV"):
        return shlex.split(os.environ["SEER_UV"])
    if shutil.which("uv"):
        return ["uv"]
    if importlib.util.find_spec("uv") is not None:
        return [sys.executable, "-m", "uv"]
    return None


def _command_line(pid: int) -> str:
    """A process's command line, for a failure's message ('' once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _install(uv: list[str], venv: Path, *requirements: str) -> None:
    """Install into ``venv`` from local paths; ``--no-sources`` so uv takes seer-core from the path
    given, not from the workspace as an editable member. The uv cache is reused: offline first."""
    base = [*uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), "--no-sources"]
    if WHEELS.is_dir():
        base += ["--find-links", str(WHEELS)]
    offline = subprocess.run([*base, "--offline", *requirements], capture_output=True, text=True, timeout=600)
    if offline.returncode != 0:
        subprocess.run([*base, *requirements], check=True, capture_output=True, text=True, timeout=600)


def test_toy_provider_passes_the_suite_with_seer_core_testing_alone(tmp_path: Path) -> None:
    uv = _uv()
    if uv is None:
        pytest.skip("uv is not installed (nor $SEER_UV set): it makes the fresh virtual environment")
    venv = tmp_path / "venv"
    subprocess.run([*uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, timeout=120)
    _install(
        uv, venv, f"{ROOT / 'seer_core'}[testing]", str(ROOT / "tests" / "plugins" / "seer-toy-provider")
    )
    python = venv / "bin" / "python"
    names = "import importlib.metadata as m; print(*sorted(d.metadata['Name'] for d in m.distributions()))"
    listed = subprocess.run(
        [str(python), "-c", names], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert {name for name in listed if name.startswith("seer")} == {"seer-core", "seer-toy-provider"}
    assert "pytest" in listed

    work = tmp_path / "repo"  # outside this repository: no conftest of seer's applies
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEER_", "PYTEST_"))}
    env["TMPDIR"] = str(tmp_path / "tmp")  # the plugin's SEER_HOME, so every toy sandbox, lies in here
    (tmp_path / "tmp").mkdir()
    report = work / "report.xml"
    run = subprocess.run(
        [str(python), "-m", "pytest", "--pyargs", "seer.testing.suite", "--seer-provider", "toy",
         "-p", "no:cacheprovider", "-q", "-rs", f"--junitxml={report}"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    cases = list(ET.parse(report).getroot().iter("testcase"))
    skipped = {
        case.get("name"): skip.get("message", "") for case in cases for skip in case.findall("skipped")
    }
    passed = [case.get("name") for case in cases if not list(case)]
    assert len(passed) >= 60 and "test_conformance_tests_run_as_written" in passed
    assert "test_exec_timeout_kills_command_and_children" in passed and "test_expose_port" in passed
    # the toy lacks snapshots and GPUs: those skip through the capability gate, with its reason
    assert skipped == {
        "test_snapshot_restores_files": "provider lacks capability: snapshots",
        "test_gpu": "provider lacks capability: gpu_types",
    }
    left = {pid: _command_line(pid) for pid in live_processes(str(tmp_path))}
    assert not left, f"a process of the suite's outlived it: {left}"
    assert not list((tmp_path / "tmp").glob("seer-test-home-*")), "the plugin's SEER_HOME was left behind"

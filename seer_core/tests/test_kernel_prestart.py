"""seer.runtime.prestart: the kernel a notebook server's launcher starts before the server, taken
once by the server's first kernel start, and stopped when nothing took it. A stand-in kernel
(it reads its connection file and waits) keeps these fast; the notebook tests run the real one."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from seer.runtime import prestart

pytestmark = pytest.mark.unit

#: Reads its connection file, reports the environment it was started with beside it (written whole,
#: then renamed into place), and waits.
_STAND_IN = """\
import json, os, sys, time
json.load(open(sys.argv[1]))
with open(sys.argv[1] + ".env.tmp", "w") as fh:
    json.dump(dict(os.environ), fh)
os.rename(sys.argv[1] + ".env.tmp", sys.argv[1] + ".env")
time.sleep(120)
"""


@pytest.fixture
def server_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    data, runtime = tmp_path / "data", tmp_path / "runtime"
    (data / "kernels" / "python3").mkdir(parents=True)
    runtime.mkdir()
    spec = {"argv": [sys.executable, "-c", _STAND_IN, "{connection_file}"], "env": {"SEER_FROM_SPEC": "1"}}
    (data / "kernels" / "python3" / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    yield runtime
    prestart.discard()  # nothing outlives a test


def _environ(started: prestart.Prestarted) -> dict[str, str]:
    """The environment the stand-in kernel reports (its own report, not ``/proc``: a process that
    has already ended shows an empty ``environ`` there, and that must fail as what it is)."""
    report = Path(started.connection_file + ".env")
    deadline = time.monotonic() + 60
    while not report.exists():
        code = started.process.poll()
        assert code is None, f"the stand-in kernel ended (exit code {code}) before it reported"
        assert time.monotonic() < deadline, "the stand-in kernel did not report its environment in 60 s"
        time.sleep(0.02)
    return json.loads(report.read_text())


def test_claimed_once_with_its_connection(server_dirs: Path, tmp_path: Path) -> None:
    started = prestart.start("python3", cwd=str(tmp_path))
    path = Path(started.connection_file)
    assert path.parent == server_dirs and path.name == f"kernel-seer-prestarted-{os.getpid()}.json"
    assert path.stat().st_mode & 0o777 == 0o600
    info = json.loads(path.read_text())
    ports = [info[f"{c}_port"] for c in ("shell", "iopub", "stdin", "control", "hb")]
    assert len(set(ports)) == 5 and all(ports)
    assert info["ip"] == "127.0.0.1" and info["transport"] == "tcp" and len(info["key"]) == 32
    assert started.argv[-1] == str(path)
    # Launched as jupyter_client launches a kernel: the spec's environment over the server's, the
    # server as the parent it watches, a session of its own.
    env = _environ(started)
    assert env["SEER_FROM_SPEC"] == "1" and env["JPY_PARENT_PID"] == str(os.getpid())
    assert os.getpgid(started.process.pid) == started.process.pid

    claimed = prestart.claim()
    assert claimed is started
    assert prestart.claim() is None  # once: the server's later kernels are its own
    started.process.kill()
    started.process.wait()
    prestart.remove_connection_file(started)
    assert not path.exists()


def test_unclaimed_kernel_is_stopped_with_the_server(server_dirs: Path, tmp_path: Path) -> None:
    started = prestart.start("python3", cwd=str(tmp_path))
    prestart.discard()
    assert started.process.poll() is not None
    assert not Path(started.connection_file).exists()
    assert prestart.claim() is None


def test_a_kernel_that_died_is_not_adopted(server_dirs: Path, tmp_path: Path) -> None:
    started = prestart.start("python3", cwd=str(tmp_path))
    started.process.kill()
    started.process.wait()
    assert prestart.claim() is None  # the server launches one instead
    assert not Path(started.connection_file).exists()

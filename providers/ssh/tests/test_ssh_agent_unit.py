"""seer-ssh's remote agent run as it runs on a host (``python3 agent.py COMMAND ...``), in a
temporary folder here: what ``begin`` and ``env`` do in one call each (#27)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import seer_ssh
from seer_ssh import agent

pytestmark = pytest.mark.unit

AGENT = Path(seer_ssh.__file__).with_name("agent.py")


def _agent(*args: str, stdin: str | None = None) -> Any:
    done = subprocess.run(
        [sys.executable, str(AGENT), *args], input=stdin, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _ready(base: Path, requirements: list[str]) -> tuple[Path, Path]:
    """A wheel, its runtime unpacked and the environment of ``requirements`` complete, as ``env``
    leaves them (the environment found where ``env`` would make it)."""
    wheel = base / "runtime" / "abc.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"wheel")
    runtime = base / "runtime" / "abc"
    runtime.mkdir()
    (runtime / ".complete").touch()
    env_dir = Path(agent._env_dir(str(base), sorted(requirements)))
    (env_dir / "bin").mkdir(parents=True)
    (env_dir / ".seer-env-complete").write_text("{}")
    return wheel, env_dir


def test_begin_makes_links_folders_record_and_environment_file_in_one_call(tmp_path: Path) -> None:
    base, shared = tmp_path / "pod", tmp_path / "volume"
    links = {str(base / name): str(shared / name) for name in ("hf-hub", "envs", "runtime")}
    os.makedirs(base)
    os.symlink(tmp_path / "old", base / "envs")  # a link already there is replaced
    env_file = "export SECRET='s3cret'\n"
    made = _agent(
        "begin",
        str(base),
        "ssh-000000000001",
        json.dumps({"name": "a"}),
        json.dumps([str(base / "runtime"), str(base / "hf-hub"), "own"]),
        json.dumps(links),
        "-",
        stdin=env_file,
    )
    sb = base / "sandboxes" / "ssh-000000000001"
    assert made == {"dir": str(sb), "workdir": str(sb / "work")}
    for link, target in links.items():
        assert os.readlink(link) == target
        assert _mode(Path(target)) == 0o700
    assert _mode(sb / "own") == 0o700
    assert (sb / "env.sh").read_text() == env_file
    assert _mode(sb / "env.sh") == 0o600  # secrets: the owner's alone
    assert json.loads((sb / "meta.json").read_text())["status"] == "running"


def test_begin_finds_a_ready_environment_and_completes_the_environment_file(tmp_path: Path) -> None:
    base = tmp_path / "base"
    requirements = ["six", "seer-runtime-dep"]
    wheel, env_dir = _ready(base, requirements)
    wanted = json.dumps({"requirements": requirements, "wheel": str(wheel)})
    made = _agent("begin", str(base), "ssh-000000000002", "{}", "[]", "{}", "-", wanted, stdin="export A=1\n")
    python = str(env_dir / "bin" / "python")
    assert made["env"] == {"python": python, "runtime": str(base / "runtime" / "abc"), "built": False}
    sb = base / "sandboxes" / "ssh-000000000002"
    assert json.loads((sb / "meta.json").read_text())["python"] == python
    lines = (sb / "env.sh").read_text().splitlines()
    assert lines[0] == "export A=1"
    assert lines[1].startswith(f"export PATH={env_dir / 'bin'}:")
    assert lines[2:] == [f"export VIRTUAL_ENV={env_dir}", f"export PYTHONPATH={base / 'runtime' / 'abc'}"]
    assert _mode(sb / "env.sh") == 0o600


def test_begin_leaves_an_environment_that_is_not_ready_to_env(tmp_path: Path) -> None:
    base = tmp_path / "base"
    wheel, env_dir = _ready(base, ["six"])
    (env_dir / ".seer-env-complete").unlink()  # a build under way, or killed
    wanted = json.dumps({"requirements": ["six"], "wheel": str(wheel)})
    made = _agent("begin", str(base), "ssh-000000000003", "{}", "[]", "{}", "-", wanted, stdin="")
    assert made["env"] is None
    assert (base / "sandboxes" / "ssh-000000000003" / "env.sh").read_text() == ""


def test_env_asks_for_the_wheel_before_doing_anything(tmp_path: Path) -> None:
    missing = tmp_path / "runtime" / "abc.whl"
    assert _agent("env", str(tmp_path), "[]", str(missing)) == {"wheel": "missing"}
    assert not (tmp_path / "envs").exists()


def test_begin_starts_the_watchdog_marked_and_recorded_and_end_stops_it(tmp_path: Path) -> None:
    """The watchdog begin starts is the kit's background process: its ``<pid> <start time>``
    record where the kit looks, its log, the sandbox's mark in its own environment (what ``end``
    kills by), and the call returns at once although it keeps running (nothing of the call's
    streams is held)."""
    import time

    base, sandbox_id = tmp_path / "base", "ssh-000000000004"
    sb = base / "sandboxes" / sandbox_id
    procs, log = sb / "work" / ".seer" / "procs", sb / "work" / ".seer" / "logs" / "watchdog.log"
    fired = tmp_path / "fired"
    spec = {
        "seconds": "600",
        "argv": ["touch", str(fired)],
        "pid_file": str(procs / "watchdog.pid"),
        "log": str(log),
    }
    env_file = f"export {agent.MARK}={sandbox_id}\n"
    started = time.monotonic()
    made = _agent("begin", str(base), sandbox_id, "{}", "[]", "{}", "-", "", json.dumps(spec), stdin=env_file)
    assert time.monotonic() - started < 10
    pid, start = (procs / "watchdog.pid").read_text().split()
    assert int(pid) == made["watchdog"] and agent._starttime(int(pid)) == start
    assert agent._watchdog_alive(str(sb))  # where ls looks for it
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert f"{agent.MARK}={sandbox_id}".encode() in environ
    assert os.getsid(int(pid)) == int(pid)  # a session of its own
    assert _mode(log) == 0o600 and _mode(procs) == 0o700
    assert _agent("end", str(base), sandbox_id, "terminated") == {"status": "terminated"}
    for _ in range(200):
        if agent._starttime(int(pid)) != start:
            break
        time.sleep(0.05)
    assert agent._starttime(int(pid)) != start
    assert not fired.exists()  # killed while it slept: its command never ran


def _running(pid: int, start: str | None) -> bool:
    """Whether process ``pid``, started at ``start``, still runs (not a zombie, not gone)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat_line.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X") and agent._starttime(pid) == start


def test_end_right_after_begin_finds_a_watchdog_still_reading_its_environment(tmp_path: Path) -> None:
    """The watchdog carries the sandbox's mark from the moment begin returns, not only once it
    has read the environment file and exec'd (here the file takes a second to read): an end that
    comes at once still finds it by the mark and kills it."""
    import time

    base, sandbox_id = tmp_path / "base", "ssh-000000000006"
    procs = base / "sandboxes" / sandbox_id / "work" / ".seer" / "procs"
    fired = tmp_path / "fired"
    spec = {
        "seconds": "2",
        "argv": ["touch", str(fired)],
        "pid_file": str(procs / "watchdog.pid"),
        "log": str(tmp_path / "watchdog.log"),
    }
    env_file = f"sleep 1\nexport {agent.MARK}={sandbox_id}\n"
    made = _agent("begin", str(base), sandbox_id, "{}", "[]", "{}", "-", "", json.dumps(spec), stdin=env_file)
    pid = made["watchdog"]
    start = agent._starttime(pid)
    assert _agent("end", str(base), sandbox_id, "terminated") == {"status": "terminated"}
    # end returns once no marked process is left: the watchdog is dead (a zombie until its new
    # parent reaps it) or gone, not still reading the environment file
    assert not _running(pid, start), "end left the watchdog running"
    time.sleep(3)  # past the watchdog's time: had it lived, its command would have run
    assert not fired.exists()


def test_a_watchdog_that_fires_runs_its_command(tmp_path: Path) -> None:
    import time

    base, sandbox_id = tmp_path / "base", "ssh-000000000005"
    work = base / "sandboxes" / sandbox_id / "work"
    fired = tmp_path / "fired"
    spec = {
        "seconds": "0",
        "argv": ["bash", "-c", f'pwd > {fired}.tmp; echo "$SEER_X" >> {fired}.tmp; mv {fired}.tmp {fired}'],
        "pid_file": str(work / ".seer" / "procs" / "watchdog.pid"),
        "log": str(work / ".seer" / "logs" / "watchdog.log"),
    }
    env_file = "export SEER_X=x\n"
    _agent("begin", str(base), sandbox_id, "{}", "[]", "{}", "-", "", json.dumps(spec), stdin=env_file)
    for _ in range(200):
        if fired.exists():
            break
        time.sleep(0.05)
    # in the working folder, with the environment file read
    assert fired.read_text().split() == [str(work), "x"]

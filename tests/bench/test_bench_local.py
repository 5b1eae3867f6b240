"""The local provider against doing the same work by hand with subprocess and pathlib.

What each row means:

* ``lifecycle``: ``Sandbox(config).start()`` + ``exec("true")`` + ``terminate()`` against making a
  directory, running ``bash -c true`` in it and removing it. seer's extra is the supervisor
  process, the state records and the plugin/config machinery.
* ``exec ...``: one command in a started sandbox against the same ``subprocess.run``.
* ``file ...`` / ``upload_dir``: file round trips through the sandbox API against plain
  ``Path.write_bytes`` / ``read_bytes`` / ``shutil.copytree``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _harness import BenchReport, compare
from seer import ExecutionMode, Sandbox, SandboxConfig
from seer.providers.base import MachineStatus

GROUP = "local provider"


def _config() -> SandboxConfig:
    # CLI mode: the bare lifecycle, with no notebook server in the figures.
    return SandboxConfig(execution_mode=ExecutionMode.CLI, timeout=600)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    sb = Sandbox(_config()).start()
    try:
        yield sb
    finally:
        sb.terminate()


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    return tmp_path


def test_bench_lifecycle(bench_report: BenchReport, scratch: Path) -> None:
    def seer_cycle() -> tuple[Any, str, Sandbox]:
        sb = Sandbox(_config()).start()
        try:
            result = sb.exec("true")
            workdir = sb.workdir
            assert Path(workdir).is_dir()
        finally:
            sb.terminate()
        return result, workdir, sb

    def check_seer(out: tuple[Any, str, Sandbox]) -> None:
        result, workdir, sb = out
        assert result.exit_code == 0
        assert not Path(workdir).exists(), "terminate() left the working directory behind"
        assert sb.status is MachineStatus.TERMINATED

    def by_hand() -> tuple[subprocess.CompletedProcess[bytes], Path]:
        workdir = Path(tempfile.mkdtemp(dir=scratch))
        proc = subprocess.run(["bash", "-c", "true"], cwd=workdir)
        shutil.rmtree(workdir)
        return proc, workdir

    def check_by_hand(out: tuple[subprocess.CompletedProcess[bytes], Path]) -> None:
        proc, workdir = out
        assert proc.returncode == 0 and not workdir.exists()

    bench_report.add(
        GROUP,
        compare(
            "lifecycle: start + exec true + terminate",
            seer=seer_cycle,
            baseline=by_hand,
            repeat=10,
            warmup=1,
            check_seer=check_seer,
            check_baseline=check_by_hand,
            note="baseline: mkdtemp + subprocess.run(bash -c true) + rmtree; target: < 50 ms over it",
        ),
    )


def test_bench_exec_shell(bench_report: BenchReport, sandbox: Sandbox) -> None:
    def check(stdout: str) -> None:
        assert stdout == "hi\n", stdout

    bench_report.add(
        GROUP,
        compare(
            'exec "echo hi"',
            seer=lambda: sandbox.exec("echo hi").stdout,
            baseline=lambda: subprocess.run(["bash", "-c", "echo hi"], capture_output=True, text=True).stdout,
            repeat=60,
            warmup=5,
            check_seer=check,
            check_baseline=check,
            note='baseline: subprocess.run(["bash", "-c", "echo hi"], capture_output=True)',
        ),
    )


def test_bench_exec_argv(bench_report: BenchReport, sandbox: Sandbox) -> None:
    def check(code: int) -> None:
        assert code == 0

    bench_report.add(
        GROUP,
        compare(
            'exec ["true"]',
            seer=lambda: sandbox.exec(["true"]).exit_code,
            baseline=lambda: subprocess.run(["true"], capture_output=True).returncode,
            repeat=60,
            warmup=5,
            check_seer=check,
            check_baseline=check,
        ),
    )


def test_bench_exec_python(bench_report: BenchReport, sandbox: Sandbox) -> None:
    code = "print(6 * 7)"

    def check(stdout: str) -> None:
        assert stdout.strip() == "42", stdout

    bench_report.add(
        GROUP,
        compare(
            "exec_python (print)",
            seer=lambda: sandbox.exec_python(code).stdout,
            baseline=lambda: (
                subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True).stdout
            ),
            repeat=20,
            warmup=2,
            check_seer=check,
            check_baseline=check,
            note="baseline: subprocess.run([sys.executable, '-'], input=code)",
        ),
    )


@pytest.mark.parametrize("size", [4 * 1024, 8 * 1024 * 1024], ids=["4KiB", "8MiB"])
def test_bench_file_round_trip(bench_report: BenchReport, sandbox: Sandbox, scratch: Path, size: int) -> None:
    data = os.urandom(size)
    label = f"{size // 1024} KiB" if size < 1024 * 1024 else f"{size // (1024 * 1024)} MiB"

    def seer_round_trip() -> bytes:
        sandbox.write_file("bench/data.bin", data)
        return sandbox.read_bytes("bench/data.bin")

    def by_hand() -> bytes:
        path = scratch / "bench" / "data.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path.read_bytes()

    def check(out: bytes) -> None:
        assert out == data

    bench_report.add(
        GROUP,
        compare(
            f"file write + read ({label})",
            seer=seer_round_trip,
            baseline=by_hand,
            repeat=40 if size < 1024 * 1024 else 15,
            warmup=2,
            check_seer=check,
            check_baseline=check,
        ),
    )
    assert Path(sandbox.workdir, "bench", "data.bin").read_bytes() == data


def test_bench_upload_dir(bench_report: BenchReport, sandbox: Sandbox, scratch: Path) -> None:
    src = scratch / "tree"
    for i in range(200):
        f = src / f"d{i % 10}" / f"f{i}.txt"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"file {i}\n" * 20)
    counter = iter(range(10**9))

    def seer_upload() -> Path:
        remote = sandbox.upload_dir(src, f"uploads/u{next(counter)}")
        return Path(remote)

    def by_hand() -> Path:
        dest = scratch / "copies" / f"c{next(counter)}"
        shutil.copytree(src, dest)
        return dest

    def check(dest: Path) -> None:
        assert sum(1 for p in dest.rglob("*.txt")) == 200
        assert (dest / "d3" / "f13.txt").read_text() == "file 13\n" * 20

    bench_report.add(
        GROUP,
        compare(
            "upload_dir (200 files)",
            seer=seer_upload,
            baseline=by_hand,
            repeat=10,
            warmup=1,
            check_seer=check,
            check_baseline=check,
            note="baseline: shutil.copytree",
        ),
    )

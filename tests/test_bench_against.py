"""``scripts/bench-against``: another revision's benchmarks set beside this tree's, round by round
(tests/bench/_against.py reads the runs' JSON, which the real harness writes here)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench-against"


def _load(name: str, path: Path) -> ModuleType:
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (dataclasses look their module up)
    loader.exec_module(module)
    return module


sys.path.insert(0, str(ROOT / "tests" / "bench"))  # (as scripts/bench-against puts it, for _against)
harness = _load("_bench_harness_for_against", ROOT / "tests" / "bench" / "_harness.py")
against = _load("_bench_against_under_test", ROOT / "tests" / "bench" / "_against.py")


def _run(folder: Path, ratios: dict[str, float], group: str = "notebook") -> Path:
    """One benchmark run's JSON as the harness writes it: each benchmark at about ``ratio``."""
    rng = random.Random(len(ratios))
    report = harness.BenchReport(folder)
    for name, ratio in ratios.items():
        baseline = [0.01 * (1 + 0.01 * rng.random()) for _ in range(20)]
        seer = harness.Timing("seer", [ratio * b for b in baseline])
        report.add(group, harness.Comparison(name, seer, harness.Timing("baseline", baseline)))
    report.write_json()
    return folder


def test_the_ratios_of_a_run_are_read_from_the_json_the_harness_writes(tmp_path: Path) -> None:
    folder = _run(tmp_path / "run", {"exec": 1.25, "start": 1.05})
    _run(folder, {"execute_code": 1.6}, group="mcp")
    ratios = against.read_ratios(folder)
    assert set(ratios) == {"notebook: exec", "notebook: start", "mcp: execute_code"}
    assert ratios["notebook: exec"] == pytest.approx(1.25, rel=1e-6)
    assert ratios["mcp: execute_code"] == pytest.approx(1.6, rel=1e-6)


def test_rows_set_both_trees_rounds_side_by_side() -> None:
    then = [{"a": 1.34, "b": 1.5, "old only": 2.0}, {"a": 1.31, "b": 1.52}, {"a": 1.35, "b": 1.49}]
    now = [{"a": 1.16, "b": 1.55, "new only": 1.0}, {"a": 1.19, "b": 1.48}, {"a": 1.14, "b": 1.53}]
    table = {row.name: row for row in against.rows(then, now)}
    assert list(table) == ["a", "b"]  # a benchmark one tree (or one round) lacks is left out
    a, b = table["a"], table["b"]
    assert (a.then, a.now) == ((1.34, 1.31, 1.35), (1.16, 1.19, 1.14))
    assert (a.then_median, a.now_median) == (1.34, 1.16)
    assert a.change == pytest.approx(1.16 / 1.34)
    assert a.rounds_apart  # every round of this tree under every round of the other
    assert a.apart_by_chance == pytest.approx(2 / 20)  # 3 + 3 rounds: 2 of 20 orders are apart
    assert against.Row("x", (1.0,) * 5, (2.0,) * 5).apart_by_chance == pytest.approx(2 / 252)
    assert against.Row("x", (1.0,), (2.0,)).apart_by_chance == 1.0  # one round each: no telling
    assert not b.rounds_apart  # 1.48-1.55 against 1.49-1.52: the rounds' spread covers it
    assert against.rows([], now) == []


def test_the_table_shows_every_round_the_medians_and_the_change() -> None:
    then = [{"exec": 1.34}, {"exec": 1.31}, {"exec": 1.35}]
    table = against.rows(then, [{"exec": 1.16}, {"exec": 1.19}, {"exec": 1.14}])
    text = against.format_rows(table, "74308c8")
    header, rule, line = text.splitlines()
    assert header.startswith("benchmark") and "74308c8: ratio per round" in header
    assert set(rule) <= {"-", " "}
    assert "1.34 1.31 1.35" in line and "1.16 1.19 1.14" in line
    assert "1.34x" in line and "1.16x" in line and "0.87" in line
    assert "rounds apart (by chance: 0.1)" in line


def test_the_script_refuses_a_revision_that_is_not_there_before_building_anything(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "no-such-revision-of-seer"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "SEER_BENCH_REV_DIR": str(tmp_path)},
        timeout=60,
    )
    assert done.returncode == 2
    assert "'no-such-revision-of-seer' names no commit of this repository" in done.stderr
    assert list(tmp_path.iterdir()) == []  # no worktree, no environment


@pytest.mark.parametrize("rounds", ["0", "three", "-2"])
def test_a_round_count_that_is_not_one_is_refused_before_building_anything(
    tmp_path: Path, rounds: str
) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "HEAD"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "SEER_BENCH_REV_DIR": str(tmp_path), "SEER_BENCH_ROUNDS": rounds},
        timeout=60,
    )
    assert done.returncode == 2
    assert f"SEER_BENCH_ROUNDS must be a whole number, 1 or more, not {rounds!r}" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_other_revision_gets_every_workspace_member_as_ci_installs_them() -> None:
    script = _load("_bench_against_script", SCRIPT)
    argv = script.members(ROOT)
    editables = argv[1::2]
    assert argv[0::2] == ["-e"] * len(editables)
    assert editables[:2] == [str(ROOT / "seer_core"), str(ROOT)]
    assert f"{ROOT / 'providers' / 'runpod'}[testing]" in editables  # its test kit's extra
    assert str(ROOT / "plugins" / "mcp") in editables

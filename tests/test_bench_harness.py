"""The benchmark harness's ratio interval (tests/bench/_harness.py): how far a run's ``seer /
baseline`` ratio could move, so that a target is judged met, missed, or within the noise."""

from __future__ import annotations

import importlib.util
import math
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit


def _harness() -> ModuleType:
    path = Path(__file__).parent / "bench" / "_harness.py"
    spec = importlib.util.spec_from_file_location("_bench_harness_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


harness = _harness()


def _noisy(rng: random.Random, n: int, scale: float) -> list[float]:
    return [scale * (1 + 0.2 * rng.random()) for _ in range(n)]


def test_the_same_work_on_both_sides_gives_an_interval_around_one() -> None:
    rng = random.Random(7)
    low, high = harness.ratio_interval(_noisy(rng, 200, 0.01), _noisy(rng, 200, 0.01))
    assert low < 1.0 < high and high - low < 0.1


def test_a_side_half_again_as_slow_is_told_apart_from_par() -> None:
    rng = random.Random(7)
    low, high = harness.ratio_interval(_noisy(rng, 200, 0.015), _noisy(rng, 200, 0.01))
    assert 1.35 < low < 1.5 < high < 1.65


def test_pairs_are_resampled_together_so_shared_load_does_not_widen_it() -> None:
    """Each pair ran under the same load (1x to 3x, drifting): resampled as pairs the interval
    stays narrow; the same samples taken apart (unequal lengths) give a much wider one."""
    rng = random.Random(3)
    load = [1 + 2 * rng.random() for _ in range(100)]
    seer = [1.2 * x * (1 + 0.02 * rng.random()) for x in load]
    baseline = [x * (1 + 0.02 * rng.random()) for x in load]
    paired = harness.ratio_interval(seer, baseline)
    apart = harness.ratio_interval(seer, baseline[:-1])
    assert paired[1] - paired[0] < (apart[1] - apart[0]) / 3
    assert paired[0] < 1.2 < paired[1] and apart[0] < 1.2 < apart[1]


def test_it_is_seeded_and_says_nothing_without_samples() -> None:
    rng = random.Random(5)
    seer, baseline = _noisy(rng, 50, 2.0), _noisy(rng, 50, 1.0)
    assert harness.ratio_interval(seer, baseline) == harness.ratio_interval(seer, baseline)
    assert all(math.isnan(x) for x in harness.ratio_interval([], baseline))


def test_the_report_shows_and_writes_it(tmp_path: Path) -> None:
    rng = random.Random(9)
    seer = harness.Timing("seer", _noisy(rng, 40, 0.012))
    cmp = harness.Comparison("exec", seer, harness.Timing("baseline", _noisy(rng, 40, 0.01)))
    report = harness.BenchReport(tmp_path)
    report.add("group", cmp)
    low, high = cmp.interval
    assert low <= cmp.ratio <= high
    assert f"{low:.2f}-{high:.2f}x" in report.table("group") and "95% interval" in report.table("group")
    assert cmp.to_dict()["ratio_interval"] == [low, high]

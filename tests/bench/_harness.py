"""A small timing harness for seer's benchmarks: seer against a hand-written baseline, same run.

Every benchmark times seer doing something and a *baseline* doing the same work by hand (plain
``subprocess``, ``pathlib``, ...) in the same process, interleaved sample by sample so both see the
same machine load. It reports medians and the ratio ``seer / baseline``, with a 95 % bootstrap
interval of that ratio (:func:`ratio_interval`); it never asserts on timings (a loaded CI machine
must not fail a run), only that the work was really done.

Use::

    from _harness import compare  # tests/bench is on sys.path while pytest runs it

    def test_bench_exec(bench_report, sandbox):
        cmp = compare(
            "exec echo",
            seer=lambda: sandbox.exec("echo hi"),
            baseline=lambda: subprocess.run(["bash", "-c", "echo hi"], capture_output=True),
            repeat=50,
        )
        bench_report.add("local provider", cmp)

``bench_report`` (tests/bench/conftest.py) prints one table per group at the end of the run and
writes them to ``bench-results/<group>.json`` (``SEER_BENCH_DIR`` moves it). ``SEER_BENCH_SCALE``
multiplies every repeat count (``0.2`` for a quick look, ``5`` for steadier numbers).
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BenchReport",
    "Comparison",
    "Timing",
    "compare",
    "fixed_width",
    "format_seconds",
    "machine_info",
    "measure",
    "ratio_interval",
    "scaled",
]


def scaled(repeat: int) -> int:
    """``repeat`` times ``$SEER_BENCH_SCALE`` (default 1), at least 3."""
    scale = float(os.environ.get("SEER_BENCH_SCALE", "1") or 1)
    return max(3, math.ceil(repeat * scale))


@dataclass
class Timing:
    """Wall-clock samples of one piece of work, in seconds."""

    name: str
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    @property
    def stdev(self) -> float:
        return statistics.stdev(self.samples) if len(self.samples) > 1 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "n": len(self.samples),
            "median_s": self.median,
            "mean_s": self.mean,
            "min_s": self.min,
            "max_s": self.max,
            "stdev_s": self.stdev,
            "samples_s": self.samples,
        }


def ratio_interval(
    seer: list[float], baseline: list[float], *, level: float = 0.95, rounds: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """A bootstrap interval (``level``, percentile) of ``median(seer) / median(baseline)``: how far
    the ratio could move if the run were repeated on a machine in the same state. Samples taken
    as pairs (:func:`compare` takes one of each side in turn: the same length) are resampled as
    pairs, so load that hit both sides of a pair does not widen it; others each on their own.
    Seeded: the same samples give the same interval."""
    if not seer or not baseline:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    paired = len(seer) == len(baseline)
    ratios = []
    for _ in range(rounds):
        if paired:
            picks = rng.choices(range(len(seer)), k=len(seer))
            s = [seer[i] for i in picks]
            b = [baseline[i] for i in picks]
        else:
            s = rng.choices(seer, k=len(seer))
            b = rng.choices(baseline, k=len(baseline))
        bottom = statistics.median(b)
        ratios.append(statistics.median(s) / bottom if bottom > 0 else math.inf)
    ratios.sort()
    tail = (1 - level) / 2
    return ratios[int(tail * (rounds - 1))], ratios[math.ceil((1 - tail) * (rounds - 1))]


@dataclass
class Comparison:
    """seer and a baseline doing the same work; ``ratio`` is seer's median over the baseline's."""

    name: str
    seer: Timing
    baseline: Timing
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.seer.median / self.baseline.median if self.baseline.median > 0 else math.inf

    @property
    def overhead(self) -> float:
        """Median seconds seer adds on top of the baseline."""
        return self.seer.median - self.baseline.median

    @functools.cached_property
    def interval(self) -> tuple[float, float]:
        """The ratio's 95 % bootstrap interval (:func:`ratio_interval`): a target is met in this
        run if the interval's top is under it, missed if its bottom is over it, and otherwise
        within what this machine's noise lets one run tell."""
        return ratio_interval(self.seer.samples, self.baseline.samples)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "note": self.note,
            "ratio": self.ratio,
            "ratio_interval": list(self.interval),
            "overhead_s": self.overhead,
            "seer": self.seer.to_dict(),
            "baseline": self.baseline.to_dict(),
        }


def measure(
    fn: Callable[[], Any],
    *,
    repeat: int = 20,
    warmup: int = 2,
    name: str = "",
    check: Callable[[Any], None] | None = None,
) -> Timing:
    """Time ``fn()`` ``repeat`` times after ``warmup`` untimed calls. ``check`` sees every
    result (timed or not), so a benchmark that stops doing its work fails instead of speeding up."""
    timing = Timing(name or getattr(fn, "__name__", "fn"))
    for _ in range(warmup):
        result = fn()
        if check is not None:
            check(result)
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        timing.samples.append(time.perf_counter() - t0)
        if check is not None:
            check(result)
    return timing


def compare(
    name: str,
    *,
    seer: Callable[[], Any],
    baseline: Callable[[], Any],
    repeat: int = 20,
    warmup: int = 2,
    check_seer: Callable[[Any], None] | None = None,
    check_baseline: Callable[[Any], None] | None = None,
    note: str = "",
) -> Comparison:
    """Time ``seer()`` against ``baseline()``, alternating one sample of each, so drift in machine
    load hits both alike. ``repeat`` goes through :func:`scaled`."""
    repeat = scaled(repeat)
    s = Timing("seer")
    b = Timing("baseline")
    for _ in range(warmup):
        for fn, check in ((seer, check_seer), (baseline, check_baseline)):
            result = fn()
            if check is not None:
                check(result)
    for i in range(repeat):
        # Alternate which goes first, so neither always runs on a warm (or cold) cache.
        pairs = [(seer, check_seer, s), (baseline, check_baseline, b)]
        for fn, check, timing in pairs if i % 2 == 0 else reversed(pairs):
            t0 = time.perf_counter()
            result = fn()
            timing.samples.append(time.perf_counter() - t0)
            if check is not None:
                check(result)
    return Comparison(name, s, b, note)


def format_seconds(seconds: float) -> str:
    """``0.000123`` -> ``"123.0 µs"``; picks s, ms or µs."""
    if math.isinf(seconds) or math.isnan(seconds):
        return str(seconds)
    magnitude = abs(seconds)
    if magnitude >= 1:
        return f"{seconds:.3f} s"
    if magnitude >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def machine_info() -> dict[str, Any]:
    """What the figures were measured on."""
    try:
        from seer import __version__ as seer_version
    except Exception:  # pragma: no cover - seer not importable
        seer_version = None
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "seer": seer_version,
        "ci": bool(os.environ.get("CI")),
        "scale": float(os.environ.get("SEER_BENCH_SCALE", "1") or 1),
    }


def fixed_width(rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` (the first the header) as the lines of a fixed-width table: the first column
    left-aligned, the others right-aligned, a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "bench"


class BenchReport:
    """Comparisons grouped by topic; printed as tables and written as JSON."""

    def __init__(self, out_dir: str | os.PathLike[str] | None = None):
        self.out_dir = Path(out_dir or os.environ.get("SEER_BENCH_DIR") or "bench-results")
        self.groups: dict[str, list[Comparison]] = {}

    def add(self, group: str, comparison: Comparison) -> Comparison:
        self.groups.setdefault(group, []).append(comparison)
        return comparison

    def table(self, group: str) -> str:
        """A fixed-width table of one group's comparisons."""
        rows = [("benchmark", "n", "seer median", "baseline median", "overhead", "ratio", "95% interval")]
        for c in self.groups.get(group, []):
            low, high = c.interval
            rows.append(
                (
                    c.name,
                    str(len(c.seer.samples)),
                    format_seconds(c.seer.median),
                    format_seconds(c.baseline.median),
                    format_seconds(c.overhead),
                    f"{c.ratio:.2f}x",
                    f"{low:.2f}-{high:.2f}x",
                )
            )
        lines = fixed_width(rows)
        notes = [f"  {c.name}: {c.note}" for c in self.groups.get(group, []) if c.note]
        return "\n".join([f"{group}", *lines, *(["notes:", *notes] if notes else [])])

    def write_json(self) -> list[Path]:
        """Write ``<out_dir>/<group>.json`` for every group; return the paths."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        info = machine_info()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for group, comparisons in self.groups.items():
            path = self.out_dir / f"{_slug(group)}.json"
            path.write_text(
                json.dumps(
                    {
                        "group": group,
                        "measured_at": stamp,
                        "machine": info,
                        "comparisons": [c.to_dict() for c in comparisons],
                    },
                    indent=2,
                )
                + "\n"
            )
            written.append(path)
        return written

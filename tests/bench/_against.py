"""Benchmarks of two trees measured in turns: what ``scripts/bench-against`` reads and prints.

Each run of ``scripts/bench`` writes one JSON file per group (``bench-results/<group>.json``,
:class:`_harness.BenchReport`), whose ``comparisons`` carry every benchmark's ``ratio`` (seer over
its own baseline, both measured in that run). ``scripts/bench-against`` runs the benchmarks of
another revision and of this tree in turns, each run into a folder of its own; this module reads
those folders and sets the two trees' ratios side by side, round by round.

A ratio is compared, never a time: each tree's seer is measured against its own baseline in the
same run, so a machine that is faster or busier in one round moves both sides of that round.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _harness import fixed_width

__all__ = ["Row", "format_rows", "read_ratios", "rows"]


def read_ratios(folder: Path) -> dict[str, float]:
    """``{"<group>: <benchmark>": ratio}`` of every benchmark one run wrote into ``folder``."""
    out: dict[str, float] = {}
    for path in sorted(folder.glob("*.json")):
        report = json.loads(path.read_text())
        group = report.get("group") or path.stem
        for comparison in report.get("comparisons") or []:
            ratio = comparison.get("ratio")
            if isinstance(ratio, (int, float)):
                out[f"{group}: {comparison['name']}"] = float(ratio)
    return out


@dataclass(frozen=True)
class Row:
    """One benchmark's ratios in every round, for the other revision (``then``) and this tree."""

    name: str
    then: tuple[float, ...]
    now: tuple[float, ...]

    @property
    def then_median(self) -> float:
        return statistics.median(self.then)

    @property
    def now_median(self) -> float:
        return statistics.median(self.now)

    @property
    def change(self) -> float:
        """This tree's median ratio over the other revision's: under 1 is faster than then."""
        return self.now_median / self.then_median

    @property
    def rounds_apart(self) -> bool:
        """Whether every round of one tree is above every round of the other: a difference the
        rounds' spread (a fresh sandbox, kernel and process each) does not explain, unless
        :attr:`apart_by_chance` is large (too few rounds)."""
        return max(self.now) < min(self.then) or min(self.now) > max(self.then)

    @property
    def apart_by_chance(self) -> float:
        """How often the rounds would come out apart were the two trees the same: every order of
        the rounds then equally likely, two of them apart (``2 / C(n + m, n)``; four rounds
        each 0.03, five 0.008, one or two each 1.0 or 0.33: too few to tell anything)."""
        return min(1.0, 2 / math.comb(len(self.then) + len(self.now), len(self.now)))


def rows(then: Sequence[dict[str, float]], now: Sequence[dict[str, float]]) -> list[Row]:
    """The benchmarks every round of both trees measured, in the order the first round has them
    (a benchmark only one tree has is left out: there is nothing to set it beside)."""
    if not then or not now:
        return []
    names = [n for n in then[0] if all(n in r for r in then) and all(n in r for r in now)]
    return [Row(n, tuple(r[n] for r in then), tuple(r[n] for r in now)) for n in names]


def format_rows(table: Sequence[Row], then_label: str) -> str:
    """The rows as a text table: each tree's ratio per round, their medians, and the change."""

    def ratios(values: Sequence[float]) -> str:
        return " ".join(f"{v:.2f}" for v in values)

    header = (
        "benchmark",
        f"{then_label}: ratio per round",
        "median",
        "this tree",
        "median",
        "change",
        "rounds",
    )
    lines = [
        (
            row.name,
            ratios(row.then),
            f"{row.then_median:.2f}x",
            ratios(row.now),
            f"{row.now_median:.2f}x",
            f"{row.change:.2f}",
            f"rounds apart (by chance: {row.apart_by_chance:.2g})" if row.rounds_apart else "rounds overlap",
        )
        for row in table
    ]
    return "\n".join(fixed_width([header, *lines]))

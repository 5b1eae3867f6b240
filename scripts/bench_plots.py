"""The benchmark figures of docs/benchmarks.md, drawn from the benchmarks' results.

    python scripts/bench_plots.py                  draw docs/img/bench/<group>.svg from bench-results/
    python scripts/bench_plots.py --results DIR    from another results folder
    python scripts/bench_plots.py --check          exit 1 if a drawn figure differs from the committed one

``scripts/bench`` (``nox -s bench``) writes ``bench-results/<group>.json``: each comparison's
timings for seer and for the hand-written baseline doing the same work. Each group becomes one
figure, seer's and the baseline's medians side by side on a log scale, with the ratio written at
each pair. The SVG is deterministic (no date, fixed ids), so the same results give the same
bytes and ``--check`` can compare. Without a results folder there is nothing to draw or check:
the committed figures are those of the run the page's tables quote.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img" / "bench"


def draw(result: dict[str, Any]) -> str:
    """One group's figure, as SVG text."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "seer-bench"  # fixed element ids: the same data, the same bytes
    comparisons = result["comparisons"]
    names = [c["name"] for c in comparisons]
    seer = [c["seer"]["median_s"] * 1000 for c in comparisons]
    base = [c["baseline"]["median_s"] * 1000 for c in comparisons]
    height = 0.38
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(names) + 1.2))
    rows = range(len(names))
    ax.barh([r - height / 2 for r in rows], seer, height, label="seer", color="#3f51b5")
    ax.barh([r + height / 2 for r in rows], base, height, label="baseline (by hand)", color="#bdbdbd")
    for r, c in zip(rows, comparisons, strict=True):
        right = max(c["seer"]["median_s"], c["baseline"]["median_s"]) * 1000
        ax.text(right * 1.15, r, f"{c['ratio']:.2f}x", va="center", fontsize=8)
    ax.set_yticks(list(rows), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("median time (ms, log scale)")
    ax.set_title(f"{result['group']}: seer vs. baseline", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_xlim(right=max(seer + base) * 4)
    fig.tight_layout()
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    return out.getvalue()


def figures(results: Path) -> dict[Path, str]:
    """``{figure path: SVG}`` for every group in ``results``."""
    drawn = {}
    for path in sorted(results.glob("*.json")):
        drawn[OUT / f"{path.stem}.svg"] = draw(json.loads(path.read_text()))
    return drawn


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench-results")
    parser.add_argument("--check", action="store_true", help="fail if a figure differs from the committed")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(f"no results in {args.results}: run scripts/bench first; nothing to draw")
        return 0
    stale = []
    for path, svg in figures(args.results).items():
        if path.is_file() and path.read_text() == svg:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(svg)
            print(f"drew {path}")
    if args.check and stale:
        names = ", ".join(str(p) for p in stale)
        fix = "run: python scripts/bench_plots.py"
        print(f"figures differ from {args.results}: {names}; {fix}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

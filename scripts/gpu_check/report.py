"""The check's table: one row per step, seer's time beside the same work done by hand."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PASSED, FAILED, SKIPPED = "passed", "FAILED", "skipped"


class StepFailed(Exception):
    """A check of a step did not hold; the message says which."""


@dataclass
class Row:
    step: str
    status: str = PASSED
    seer_s: float | None = None
    by_hand_s: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> str:
        if self.seer_s is None or self.by_hand_s is None or self.by_hand_s <= 0:
            return "-"
        return f"{self.seer_s / self.by_hand_s:.2f}x"


def check(condition: object, message: str) -> None:
    """Fail the step with ``message`` unless ``condition`` holds."""
    if not condition:
        raise StepFailed(message)


class Timer:
    """Seconds of one piece of work: ``with timer: ...`` then ``timer.seconds``."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __enter__(self) -> Timer:
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.perf_counter() - self._started


@dataclass
class Report:
    title: str
    rows: list[Row] = field(default_factory=list)

    @contextmanager
    def step(self, name: str) -> Iterator[Row]:
        """A row for ``name``: FAILED with the reason if the block raises, else as the block left it."""
        row = Row(name)
        self.rows.append(row)
        print(f"gpu-check: {name} ...", flush=True)
        try:
            yield row
        except StepFailed as exc:
            row.status = FAILED
            row.notes.append(str(exc))
        except Exception as exc:  # a step that breaks is a failed row, and the next step runs
            row.status = FAILED
            row.notes.append(f"{type(exc).__name__}: {exc}"[:600])
        print(f"gpu-check: {name}: {row.status} {'; '.join(row.notes)}", flush=True)

    def skip(self, name: str, why: str) -> None:
        self.rows.append(Row(name, SKIPPED, notes=[why]))
        print(f"gpu-check: {name}: skipped ({why})", flush=True)

    @property
    def failed(self) -> bool:
        return any(row.status == FAILED for row in self.rows)

    def markdown(self) -> str:
        def seconds(value: float | None) -> str:
            if value is None:
                return "-"
            return f"{value * 1000:.1f} ms" if value < 0.1 else f"{value:.2f} s"

        def cell(text: str) -> str:
            return text.replace("|", "\\|").replace("\n", " ")

        lines = [
            f"### {self.title}",
            "",
            "| step | result | seer | by hand | seer / by hand | notes |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for row in self.rows:
            lines.append(
                f"| {cell(row.step)} | {row.status} | {seconds(row.seer_s)} | {seconds(row.by_hand_s)} "
                f"| {row.ratio} | {cell('; '.join(row.notes))} |"
            )
        return "\n".join(lines) + "\n"

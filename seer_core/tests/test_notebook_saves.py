"""When a live document is saved (seer.notebook.saves): unit tests, no Jupyter server."""

from __future__ import annotations

import threading
import time

import pytest
from seer.errors import NotebookError
from seer.notebook import saves
from seer.notebook.saves import SaveScheduler

pytestmark = pytest.mark.unit


class Saves:
    """A save that records when it ran (and fails while ``fail`` is set)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.fail: str | None = None
        self.lock = threading.Lock()

    def __call__(self, timeout: float = 30.0) -> None:
        with self.lock:
            self.times.append(time.monotonic())
        if self.fail:
            raise NotebookError(self.fail)


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(saves, "SAVE_IDLE", 0.2)
    monkeypatch.setattr(saves, "SAVE_LATEST", 0.8)
    monkeypatch.setattr(saves, "SAVE_PAUSE", 0.3)


def test_a_burst_of_requests_is_saved_once_when_it_pauses() -> None:
    save = Saves()
    scheduler = SaveScheduler(save)
    try:
        for _ in range(5):
            scheduler.request()
            time.sleep(0.01)
        assert scheduler.wait(5)
        assert len(save.times) == 1
        scheduler.request()  # a later request is saved too
        assert scheduler.wait(5) and len(save.times) == 2
        assert save.times[1] - save.times[0] >= saves.SAVE_PAUSE - 0.01
    finally:
        scheduler.stop(join=5)


def test_requests_that_keep_coming_are_saved_at_the_latest_after_save_latest() -> None:
    save = Saves()
    scheduler = SaveScheduler(save)
    try:
        first = time.monotonic()
        while time.monotonic() - first < 2.0:  # never idle for SAVE_IDLE
            scheduler.request()
            time.sleep(0.01)
        assert save.times, "nothing was saved while requests kept coming"
        assert save.times[0] - first <= saves.SAVE_LATEST + 0.5
        assert scheduler.wait(5)
    finally:
        scheduler.stop(join=5)


def test_flush_saves_at_once_and_a_failure_is_raised_and_kept() -> None:
    save = Saves()
    scheduler = SaveScheduler(save)
    try:
        scheduler.request()
        scheduler.flush(5)  # without waiting for the request's time: the flush holds it
        assert len(save.times) == 1 and scheduler.error is None
        time.sleep(0.6)
        assert len(save.times) == 1, "the request the flush covered was saved again"
        save.fail = "the disk is full"
        with pytest.raises(NotebookError, match="the disk is full"):
            scheduler.flush(5)
        assert scheduler.error == "the disk is full"
        scheduler.request()  # the thread's failures are kept the same way
        assert scheduler.wait(5) and scheduler.error == "the disk is full"
        save.fail = None
        scheduler.request()
        assert scheduler.wait(5) and scheduler.error is None
    finally:
        scheduler.stop(join=5)


def test_a_stopped_scheduler_drops_what_is_pending() -> None:
    save = Saves()
    scheduler = SaveScheduler(save)
    scheduler.request()
    scheduler.stop(join=5)
    assert scheduler.wait(1)
    time.sleep(0.5)
    assert save.times == []

"""Shared by the teardown and lifecycle tests (local and Docker): waiting on teardown, and running
``seer down`` as its own process from another directory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Whether ``predicate()`` holds within ``timeout`` seconds (checked every ``interval``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def seer_down_from(cwd: Path, sandbox_id: str) -> subprocess.CompletedProcess[str]:
    """``seer down SANDBOX_ID`` run in ``cwd``, with no ``SEER_OUTPUTS_DIR``."""
    env = {k: v for k, v in os.environ.items() if k != "SEER_OUTPUTS_DIR"}
    return subprocess.run(
        [sys.executable, "-m", "seer", "down", sandbox_id],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

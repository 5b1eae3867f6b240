"""Shared by the killed-start tests (local in seer_core/tests/, docker in providers/docker/tests/):
a client process that starts a sandbox and stops at a chosen step of ``Sandbox.start()``, for
the test to SIGKILL.

The client hooks its own progress (``Sandbox(config, progress=...)``): when the step is reached it
prints ``at <step text>`` and sleeps, so the test knows exactly where the start is when it kills
the client, and can look at the half-made sandbox first.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from seer.config import SandboxConfig

CLIENT = """
import contextlib, json, sys, time
from seer import Sandbox, SandboxConfig
from seer.progress import Progress

config = SandboxConfig.model_validate(json.loads(sys.argv[1]))
where, needle, name = sys.argv[2], sys.argv[3], sys.argv[4]

def pause(text):
    print("at " + text, flush=True)
    time.sleep(3600)

class PauseAt(Progress):
    @contextlib.contextmanager
    def step(self, text):
        if where == "enter" and needle in text:
            pause(text)
        with super().step(text):
            yield
        if where == "exit" and needle in text:
            pause(text)

    def update(self, text):
        if where == "update" and needle in text:
            pause(text)
        super().update(text)

Sandbox(config, progress=PauseAt(enabled=False)).start(name=name)
print("started: the step was never reached", flush=True)
"""

#: Where a client stops: ``(where, text)``; ``where`` is ``enter`` / ``exit`` of a step whose text
#: holds ``text``, or an ``update`` (a line of provisioning output) holding it.
Stop = tuple[str, str]


class PausedClient:
    """A client paused at a step of its sandbox's start; :meth:`kill` sends it SIGKILL."""

    def __init__(self, config: SandboxConfig, stop: Stop, name: str, *, timeout: float = 600):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, json.dumps(config.model_dump(mode="json")), *stop, name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not line or not line[0].startswith("at "):
            self.kill()
            raise AssertionError(
                f"the client did not stop at {stop}: {line[0] if line else 'nothing printed'}\n"
                f"{self.proc.stderr.read()[-3000:] if self.proc.stderr else ''}"
            )
        self.step = line[0][3:].strip()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def __enter__(self) -> PausedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.2) -> bool:
    """Whether ``predicate()`` holds within ``timeout`` seconds (returns as soon as it does)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())

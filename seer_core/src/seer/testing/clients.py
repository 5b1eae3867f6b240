"""Clients that die: what a crashed or killed user script leaves behind, for tests.

A sandbox must outlive the client that started it (a notebook's kernel, a script that ended) and
end by its own lifetime limit, or when ``seer down`` ends it from anywhere. Every provider tests
that the same way: start the sandbox from a separate Python process, kill that process with
SIGKILL once ``start()`` returned (no ``finally``, no ``atexit``), then look for the sandbox from
the test. :func:`killed_client` is that first half.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seer.config import SandboxConfig

__all__ = ["killed_client"]

_CLIENT = """
import json, sys, time
from seer import Sandbox, SandboxConfig

config = SandboxConfig.model_validate(json.loads(sys.argv[1]))
sandbox = Sandbox(config).start(name=sys.argv[2])
print(sandbox.sandbox_id, flush=True)
time.sleep(3600)
"""


def killed_client(
    config: SandboxConfig,
    *,
    name: str = "orphan",
    start_timeout: float = 600,
    env: Mapping[str, str] | None = None,
) -> str:
    """Start a sandbox from ``config`` in a client process of its own, kill that process with
    SIGKILL as soon as ``start()`` returned, and return the sandbox's id.

    The client runs this interpreter with the test's environment (``env`` replaces it), so the
    provider's credentials and fake endpoints reach it as they would reach a user's script.
    Raises :class:`AssertionError` with the end of the client's stderr when it exits, or prints
    nothing within ``start_timeout`` seconds, before a sandbox id.
    """
    with tempfile.TemporaryFile(mode="w+") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CLIENT, json.dumps(config.model_dump(mode="json")), name],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=dict(env) if env is not None else None,
        )
        assert proc.stdout is not None
        try:
            deadline = time.monotonic() + start_timeout
            line = ""
            while not line:
                left = deadline - time.monotonic()
                if left <= 0 or proc.poll() is not None:
                    break
                if select.select([proc.stdout], [], [], min(left, 1.0))[0]:
                    line = proc.stdout.readline().strip()
                    if not line:  # end of output: the client exited
                        break
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
            proc.stdout.close()
        if not line:
            stderr.seek(0)
            what = f"exited {proc.returncode}" if proc.returncode != -signal.SIGKILL else "printed nothing"
            raise AssertionError(
                f"the client that starts {name!r} {what} within {start_timeout:.0f} s; "
                f"its stderr ends:\n{stderr.read()[-3000:]}"
            )
    return line

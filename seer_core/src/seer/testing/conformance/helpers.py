"""What the conformance suite's tests share: the names it sets in sandboxes, polling, loopback
HTTP, and the processes alive on a host."""

from __future__ import annotations

import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from seer.providers.base import Provider

#: Set in every suite sandbox's ``env``: commands must see it.
ENV_NAME = "SEER_CONFORMANCE_ENV"
ENV_VALUE = "from-config"
#: Named in every suite sandbox's ``secrets``; its value is set in the client's environment.
SECRET_NAME = "SEER_CONFORMANCE_SECRET"
#: Set in the client's environment but named nowhere: no sandbox may see it.
CLIENT_ONLY_NAME = "SEER_CONFORMANCE_CLIENT_ONLY"

T = TypeVar("T")

__all__ = [
    "CLIENT_ONLY_NAME",
    "ENV_NAME",
    "ENV_VALUE",
    "SECRET_NAME",
    "alive_ids",
    "answers",
    "fetch",
    "live_processes",
    "opener",
    "tree",
    "unique_token",
    "wait_for",
]


# --- helpers ---------------------------------------------------------------------------------
def live_processes(token: str) -> list[int]:
    """PIDs of running (not zombie) processes whose command line contains ``token``.

    Self-contained: the suite also runs its source inside the sandbox to look there.
    """
    import os
    import subprocess

    me = os.getpid()
    found = []
    if os.path.isdir("/proc"):
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmdline = fh.read()
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    state = fh.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if token.encode() in cmdline and state not in (b"Z", b"X"):
                found.append(int(entry))
        return found
    out = subprocess.run(["ps", "-axo", "pid=,stat=,args="], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and token in parts[2] and not parts[1].startswith("Z") and int(parts[0]) != me:
            found.append(int(parts[0]))
    return found


def wait_for(check: Callable[[], T], *, timeout: float, what: str, interval: float = 0.1) -> T:
    """Poll ``check`` until it returns something truthy (returned), failing after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def opener(url: str) -> urllib.request.OpenerDirector:
    """A URL opener; one that bypasses proxies for a loopback URL."""
    host = urllib.parse.urlsplit(url).hostname or ""
    # A loopback URL must not go through a proxy from the environment.
    if host in ("127.0.0.1", "localhost", "::1"):
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


def fetch(url: str, *, attempts: int = 60, delay: float = 0.25, timeout: float = 5.0) -> bytes:
    """GET ``url``, retrying a bounded number of times while the server comes up."""
    client = opener(url)
    last: Exception | None = None
    for _ in range(attempts):
        try:
            with client.open(url, timeout=timeout) as resp:
                return resp.read()
        except (urllib.error.URLError, OSError) as exc:
            last = exc
            time.sleep(delay)
    raise AssertionError(f"GET {url} failed {attempts} times; last error: {last!r}")


def answers(url: str) -> bool:
    """Whether one GET of ``url`` succeeds."""
    try:
        with opener(url).open(url, timeout=3) as resp:
            resp.read()
        return True
    except (urllib.error.URLError, OSError):
        return False


def unique_token() -> str:
    """A fresh token to mark a test's processes and files by."""
    return f"seerconf{secrets.token_hex(6)}"


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root``: relative path -> file bytes (None for a directory)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        out[rel] = None if path.is_dir() else path.read_bytes()
    return out


def alive_ids(provider: Provider) -> set[str]:
    """The ids of the provider's sandboxes that are alive."""
    return {m.id for m in provider.list() if m.status.alive}

"""What the ``debug=True`` (code-server) tests of the remote providers share (issue #28).

:data:`PREPARED` is the local provider's tools folder where it holds a complete install
(``scripts/code-server`` makes it; CI runs it first): the ssh and slurm tests copy it to their
hosts with ``provider_options.code_server_from``, as their hosts have no compilers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _progress_kit import RecordingProgress
from seer import Sandbox
from seer.providers import code_server as installer
from seer.providers.local.provider import local_tools_dir

#: The line of the working directory's file the browser must show.
MARKER = "SEER_DEBUG_MARKER = 28"
#: The local tools folder where it holds a complete install (None: it does not).
PREPARED = str(local_tools_dir()) if installer.installed(str(local_tools_dir())) else None


def prepared_or_skip() -> str:
    """:data:`PREPARED`, or a skip saying how to make it."""
    if PREPARED is None:
        pytest.skip(f"no code-server install in {local_tools_dir()} to copy (scripts/code-server makes it)")
    return PREPARED


def client_installs() -> list[str]:
    """The prepared install's own ``installs.log`` lines (a copy carries them, plus its own)."""
    return Path(installer.layout(prepared_or_skip())["installs"]).read_text().splitlines()


def assert_copied_once(installs: list[str]) -> None:
    """A host's ``installs.log``: the prepared install's own lines, then one upload's, no more."""
    client = client_installs()
    assert installs[: len(client)] == client, installs
    assert len(installs) == len(client) + 1 and "uploaded code-server" in installs[-1], installs


def assert_nothing_copied(lines: list[str]) -> None:
    """A start's progress lines: code-server found on the host, neither copied nor installed."""
    assert any("has it: nothing copied" in line for line in lines), lines
    assert not any("code-server: copied" in line for line in lines), lines
    assert not any("installed code-server" in line for line in lines), lines


def write_project(folder: Path) -> Path:
    """``hello_debug.py`` in ``folder``, holding :data:`MARKER`."""
    path = folder / "hello_debug.py"
    path.write_text(f"{MARKER}\nprint(SEER_DEBUG_MARKER)\n")
    return path


@contextmanager
def started(config: Any) -> Iterator[tuple[Sandbox, list[str]]]:
    """A sandbox of ``config``, started with a :class:`RecordingProgress`: the sandbox and the
    lines its start reported; it is terminated (``force=True``) when the block ends."""
    progress = RecordingProgress()
    sandbox = Sandbox(config, progress=progress).start()
    try:
        yield sandbox, progress.lines
    finally:
        sandbox.terminate(force=True)

"""Shared test ground rules, for every test folder of the workspace (``seer_core/tests``,
``providers/*/tests``, ``plugins/*/tests``, ``contrib/*/tests`` and the cross-package ``tests/``):
this conftest sits at the root so each of them gets it, whichever folder pytest is pointed at.
The shared helpers (``_model_kit``, ``_images``, ...) live in ``tests/``, which pyproject's
``pythonpath`` puts on ``sys.path``.

* ``SEER_HOME`` points at a fresh directory for the whole run, so tests never touch the user's
  state and every sandbox they start can be found afterwards.
* ``HF_HUB_OFFLINE=1``: no test reaches a model hub (the download-path test sets its own
  ``HF_ENDPOINT`` on 127.0.0.1), and ``HF_HOME`` is inside the run's directory, so nothing is
  written to the user's Hugging Face cache.
* At the end of the run, no local sandbox may still be running: a leak fails the run.
* Every test is ``unit`` or ``e2e`` (``tests/_test_kinds.py``, loaded here for every folder).
* Ctrl-C (SIGINT) raises ``KeyboardInterrupt`` in the run and in every process it starts, however
  the run was launched: a shell without job control starts a background command (``... &``) with
  SIGINT ignored, every process below it inherits that, and the tests of what Ctrl-C does would
  fail (a Python started with SIGINT ignored keeps ignoring it).
"""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["_test_kinds"]

_HOME = Path(tempfile.mkdtemp(prefix="seer-test-home-"))
os.environ["SEER_HOME"] = str(_HOME)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HOME"] = str(_HOME / "hf-home")
os.environ["SEER_OUTPUTS_DIR"] = str(_HOME / "outputs")  # notebook mirrors, not in the checkout
os.environ.pop("HF_HUB_CACHE", None)
os.environ.pop("HF_TOKEN", None)
os.environ.pop("SEER_PROVIDER", None)
os.environ.pop("SEER_LOAD_PLUGINS", None)
os.environ.pop("SEER_DISABLE_PLUGINS", None)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def seer_home() -> Path:
    """The run's ``SEER_HOME``."""
    return _HOME


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Reload plugins before and after a test that changes plugin environment variables."""
    from seer import plugins

    plugins.reset()
    yield
    plugins.reset()


def running_local_sandboxes() -> list[str]:
    from seer.providers.local.provider import LocalProvider

    return [m.id for m in LocalProvider().list() if m.status.alive]


@pytest.fixture(scope="session", autouse=True)
def _no_leaked_sandboxes() -> Iterator[None]:
    yield
    from seer.providers.local.provider import LocalProvider

    leaked = running_local_sandboxes()
    for sandbox_id in leaked:
        LocalProvider().terminate(sandbox_id)
    assert not leaked, f"tests left local sandboxes running: {leaked}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After a run that ran the docs' code blocks: how many ran, were checked only, and why."""
    reports = [r for kind in terminalreporter.stats.values() for r in kind]
    if not any(getattr(r, "nodeid", "").startswith("tests/test_doc_blocks.py") for r in reports):
        return
    from test_doc_blocks import census_line

    terminalreporter.write_sep("-", "documentation code blocks (README.md, docs/, SKILL.md)")
    terminalreporter.write_line(census_line())

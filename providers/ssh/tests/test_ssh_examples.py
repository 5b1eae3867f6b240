"""The notebook and scoped-sandbox examples over SSH, unchanged but for ``provider="ssh"``.

The other changes are what this machine needs, as in ``tests/docker/test_docker_examples.py``: the
tiny model, served by a hub-compatible server on 127.0.0.1 (no model hub here), the test host's
address and keys, and torch pinned to the CPU build this machine keeps a wheel of.

After the notebook flow's setup script, the agent's MCP server attaches as the seed says and writes
the notebook too, and ``seer down`` keeps every writer's cell, in the sandbox's ``.ipynb`` and the
client copy (``tests/_seed_notebook.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _model_kit import MODEL_ID
from _seed_kit import PACKAGES, attach_and_check_model, printed_by, run_setup, served_seed, setup_script
from _seed_notebook import agent_then_teardown_keeps_every_cell
from _ssh_kit import Box
from seer.rpc import ServedInterface
from seer_ssh.provider import SshProvider
from test_scoped import test_seed_interface_through_each_of_the_four_expose_modes as four_modes

# Each start makes (or reuses) an environment on the host; torch, transformers and Jupyter are in the
# host's system Python (conftest.py's box), as on a GPU box, so it installs nothing heavy.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]


def _running(box: Box) -> set[str]:
    return {m.id for m in SshProvider().list() if m.status.alive}


def test_seed_notebook_setup_over_ssh(box: Box, hub: Any, tmp_path: Path) -> None:
    out = run_setup(setup_script("ssh", box.options(), hub.env()), tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    printed = printed_by(out)
    started = set(re.findall(r"sandbox (ssh-[0-9a-f]{12}) on", out.stderr))
    try:
        assert len(started) == 1 and started <= _running(box), (started, out.stderr[-2000:])
        # the setup script has exited; the agent attaches through the forward it left running
        assert printed["jupyter_url"].startswith("http://127.0.0.1:")
        session = attach_and_check_model(printed)
        where = session.exec("import os; print(os.environ['SEER_SANDBOX_ID'], os.getcwd())")
        sandbox_id, cwd = where.stdout.split()
        assert sandbox_id in started and cwd.startswith("/home/seer/.seer/sandboxes/"), (
            "the kernel runs on the host"
        )
        # the agent's MCP server writes the same notebook; seer down keeps every cell
        agent_then_teardown_keeps_every_cell(printed, sandbox_id, session)
    finally:
        for sandbox_id in started:
            SshProvider().terminate(sandbox_id)


@pytest.fixture(scope="module")
def seed(box: Box, hub: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedInterface]:
    config = box.config(
        execution_mode="local", models=[{"name": MODEL_ID}], env=hub.env(), python_packages=PACKAGES
    )
    with served_seed(config, "scoped-ssh", tmp_path_factory.mktemp("seed")) as served:
        yield served


def test_seed_interface_through_the_four_expose_modes_over_ssh(seed: ServedInterface, tmp_path: Path) -> None:
    assert seed.url.startswith("http://127.0.0.1:") and seed.sandbox_id.startswith("ssh-")
    four_modes(seed, tmp_path)

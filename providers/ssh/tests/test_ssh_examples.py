"""The notebook and scoped-sandbox examples over SSH, unchanged but for ``provider="ssh"``.

The other changes are what this machine needs, as in ``tests/docker/test_docker_examples.py``: the
tiny model, served by a hub-compatible server on 127.0.0.1 (no model hub here), the test host's
address and keys, and torch pinned to the CPU build this machine keeps a wheel of.

After the notebook flow's setup script, the agent's MCP server attaches as the seed says and writes
the notebook too, and ``seer down`` keeps every writer's cell, in the sandbox's ``.ipynb`` and the
client copy (``tests/_seed_notebook.py``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _model_kit import MODEL_ID
from _seed_notebook import agent_then_teardown_keeps_every_cell
from _ssh_kit import Box
from seer import ScopedSandbox
from seer.rpc import ServedInterface
from seer_ssh.provider import SshProvider
from test_scoped import SEED_INTERFACE
from test_scoped import test_seed_interface_through_each_of_the_four_expose_modes as four_modes
from test_seed_examples import MINIMAL_SETUP, MODEL_CHECKS

# Each start makes (or reuses) an environment on the host; torch, transformers and Jupyter are in the
# host's system Python (conftest.py's box), as on a GPU box, so it installs nothing heavy.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

#: What a model-loading sandbox installs on this machine (torch: the local CPU wheel).
PACKAGES = ["torch==2.13.0", "transformers", "accelerate"]


def _ssh_setup(box: Box, hub: Any) -> str:
    """Seed 004's minimal setup script, moved to the SSH host."""
    script = MINIMAL_SETUP.replace(
        "    gpu=None,\n",
        f'    gpu=None,\n    provider="ssh",\n    provider_options={box.options()!r},\n'
        f"    env={hub.env()!r},\n",
    ).replace('python_packages=["torch", "transformers", "accelerate"]', f"python_packages={PACKAGES!r}")
    assert 'provider="ssh"' in script and "torch==2.13.0" in script
    return script


def _running(box: Box) -> set[str]:
    return {m.id for m in SshProvider().list() if m.status.alive}


def test_seed_notebook_setup_over_ssh(box: Box, hub: Any, tmp_path: Path) -> None:
    from seer.notebook import NotebookSession

    script = tmp_path / "setup.py"
    script.write_text(_ssh_setup(box, hub))
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "HF_TOKEN": "hf_not_a_real_token"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    printed = json.loads(out.stdout.strip().splitlines()[-1])
    started = set(re.findall(r"sandbox (ssh-[0-9a-f]{12}) on", out.stderr))
    try:
        assert len(started) == 1 and started <= _running(box), (started, out.stderr[-2000:])
        # the setup script has exited; the agent attaches through the forward it left running
        assert printed["jupyter_url"].startswith("http://127.0.0.1:")
        session = NotebookSession.attach(printed["jupyter_url"], printed["session_id"])
        assert f"**model** ({MODEL_ID})" in session.model_info_text
        result = session.exec(MODEL_CHECKS)
        assert result.ok, result.error
        seen = json.loads(result.stdout)
        assert seen["states"] == 3 and seen["fired"] == [seen["last"]]
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
    sandbox = ScopedSandbox(config)
    try:
        sandbox.start(name="scoped-ssh")
        path = tmp_path_factory.mktemp("seed") / "interface.py"
        path.write_text(SEED_INTERFACE)
        served = sandbox.serve(path, expose_as=None)
        assert isinstance(served, ServedInterface)
        yield served
    finally:
        sandbox.terminate()


def test_seed_interface_through_the_four_expose_modes_over_ssh(seed: ServedInterface, tmp_path: Path) -> None:
    assert seed.url.startswith("http://127.0.0.1:") and seed.sandbox_id.startswith("ssh-")
    four_modes(seed, tmp_path)

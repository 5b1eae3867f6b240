"""The notebook and scoped-sandbox examples on RunPod (the fake API, pods as SSH-able containers),
unchanged but for ``provider="runpod"``.

The other changes are what this machine needs, as in seer-ssh's and seer-docker's example tests:
the tiny model served on 127.0.0.1, a network volume (so the two pods build one environment), and
torch pinned to the CPU build this machine keeps a wheel of.

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
from seer import SandboxConfig, ScopedSandbox
from seer.rpc import ServedInterface
from seer_runpod.provider import RunPodProvider
from seer_runpod.testing import FakeRunPod
from test_scoped import SEED_INTERFACE
from test_scoped import test_seed_interface_through_each_of_the_four_expose_modes as four_modes
from test_seed_examples import MINIMAL_SETUP, MODEL_CHECKS

# Each start makes (or reuses) an environment on the volume; torch, transformers and Jupyter are in
# the pods' system Python (conftest.py), as in RunPod's pytorch images, so it installs nothing heavy.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.usefixtures("no_leaked_pods"),
]

#: What a model-loading sandbox installs on this machine (torch: the local CPU wheel).
PACKAGES = ["torch==2.13.0", "transformers", "accelerate"]


def test_seed_notebook_setup_on_runpod(
    fake_runpod: FakeRunPod, volume: str, hub: Any, tmp_path: Path
) -> None:
    from seer.notebook import NotebookSession

    options = {"network_volume_id": volume}
    script = MINIMAL_SETUP.replace(
        "    gpu=None,\n",
        f'    gpu=None,\n    provider="runpod",\n    provider_options={options!r},\n    env={hub.env()!r},\n',
    ).replace('python_packages=["torch", "transformers", "accelerate"]', f"python_packages={PACKAGES!r}")
    (tmp_path / "setup.py").write_text(script)
    out = subprocess.run(
        [sys.executable, "setup.py"],
        cwd=tmp_path,
        env={**os.environ, "HF_TOKEN": "hf_not_a_real_token"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    started = {m.id for m in RunPodProvider().list() if m.status.alive}
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        assert len(started) == 1, (started, out.stderr[-2000:])
        printed = json.loads(out.stdout.strip().splitlines()[-1])
        # the setup script has exited; the agent attaches through the forward it left running
        session = NotebookSession.attach(printed["jupyter_url"], printed["session_id"])
        assert f"**model** ({MODEL_ID})" in session.model_info_text
        result = session.exec(MODEL_CHECKS)
        assert result.ok, result.error
        seen = json.loads(result.stdout)
        assert seen["states"] == 3 and seen["fired"] == [seen["last"]]
        where = session.exec("import os; print(os.environ['RUNPOD_POD_ID'])").stdout.strip()
        assert re.fullmatch(r"[a-z0-9]+", where) and fake_runpod.pods[where].terminated_by is None
        # the agent's MCP server writes the same notebook; seer down keeps every cell
        (sandbox_id,) = started
        agent_then_teardown_keeps_every_cell(printed, sandbox_id, session)
    finally:
        for sandbox_id in started:
            RunPodProvider().terminate(sandbox_id)


@pytest.fixture(scope="module")
def seed(volume: str, hub: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedInterface]:
    config = SandboxConfig(
        provider="runpod",
        execution_mode="local",
        models=[{"name": MODEL_ID}],
        env=hub.env(),
        python_packages=PACKAGES,
        provider_options={"network_volume_id": volume},
    )
    sandbox = ScopedSandbox(config)
    try:
        sandbox.start(name="scoped-runpod")
        path = tmp_path_factory.mktemp("seed") / "interface.py"
        path.write_text(SEED_INTERFACE)
        served = sandbox.serve(path, expose_as=None)
        assert isinstance(served, ServedInterface)
        yield served
    finally:
        sandbox.terminate()


def test_seed_interface_through_the_four_expose_modes_on_runpod(
    seed: ServedInterface, tmp_path: Path
) -> None:
    assert seed.url.startswith("http://127.0.0.1:") and seed.sandbox_id.startswith("runpod-")
    four_modes(seed, tmp_path)

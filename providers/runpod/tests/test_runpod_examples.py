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

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _model_kit import MODEL_ID
from _seed_kit import PACKAGES, attach_and_check_model, printed_by, run_setup, served_seed, setup_script
from _seed_notebook import agent_then_teardown_keeps_every_cell
from seer import SandboxConfig
from seer.rpc import ServedInterface
from seer_runpod.provider import RunPodProvider
from seer_runpod.testing import FakeRunPod
from test_scoped import test_seed_interface_through_each_of_the_four_expose_modes as four_modes

# Each start makes (or reuses) an environment on the volume; torch, transformers and Jupyter are in
# the pods' system Python (conftest.py), as in RunPod's pytorch images, so it installs nothing heavy.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.usefixtures("no_leaked_pods"),
]


def test_seed_notebook_setup_on_runpod(
    fake_runpod: FakeRunPod, volume: str, hub: Any, tmp_path: Path
) -> None:
    out = run_setup(setup_script("runpod", {"network_volume_id": volume}, hub.env()), tmp_path)
    started = {m.id for m in RunPodProvider().list() if m.status.alive}
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        assert len(started) == 1, (started, out.stderr[-2000:])
        printed = printed_by(out)
        # the setup script has exited; the agent attaches through the forward it left running
        session = attach_and_check_model(printed)
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
    with served_seed(config, "scoped-runpod", tmp_path_factory.mktemp("seed")) as served:
        yield served


def test_seed_interface_through_the_four_expose_modes_on_runpod(
    seed: ServedInterface, tmp_path: Path
) -> None:
    assert seed.url.startswith("http://127.0.0.1:") and seed.sandbox_id.startswith("runpod-")
    four_modes(seed, tmp_path)

"""The notebook and scoped-sandbox examples on Docker, unchanged but for ``provider="docker"``.

The other changes are what this machine needs, as in ``tests/test_seed_examples.py``: the tiny
model, served by a hub-compatible server on 127.0.0.1 (no model hub here, and the container cannot
see the client's Hugging Face cache), the test base image (nothing can be pulled), and torch pinned
to the CPU build this machine keeps a wheel of.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from _docker_kit import BASE_IMAGE, docker_config
from _model_kit import MODEL_ID
from _seed_kit import PACKAGES, attach_and_check_model, printed_by, run_setup, setup_script
from seer import ScopedSandbox
from seer.rpc import ServedInterface
from seer_docker.provider import DockerProvider
from test_scoped import SEED_INTERFACE

# The first run builds an image with torch and Jupyter in it: minutes, not seconds.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]


def _docker_setup(hub: Any, volume: str, name: str) -> str:
    """Seed 004's minimal setup script, moved to Docker, its sandbox marked ``name`` (an
    environment variable, ``SEER_TEST_RUN``)."""
    options = {"image": BASE_IMAGE, "network": "host", "model_volume": volume}
    return setup_script("docker", options, {**hub.env(), "SEER_TEST_RUN": name})


def _sandbox_ids(client: Any, name: str) -> set[str]:
    """The sandboxes marked ``name`` (see :func:`_docker_setup`): other tests (another xdist
    worker) start sandboxes of their own on the same engine meanwhile, and this test must neither
    count nor terminate those."""
    found = client.containers.list(ignore_removed=True, filters={"label": "seer.sandbox"})
    return {
        c.labels["seer.sandbox"] for c in found if f"SEER_TEST_RUN={name}" in (c.attrs["Config"]["Env"] or [])
    }


def test_seed_notebook_setup_on_docker(docker_engine: Any, hub: Any, volume: str, tmp_path: Path) -> None:
    name = f"seed-004-{uuid.uuid4().hex[:8]}"
    before = _sandbox_ids(docker_engine, name)
    out = run_setup(_docker_setup(hub, volume, name), tmp_path)
    started = _sandbox_ids(docker_engine, name) - before
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        assert len(started) == 1, started
        printed = printed_by(out)
        assert printed["jupyter_url"].startswith("http://127.0.0.1:")
        # The setup script has exited; the agent attaches to the session it printed.
        session = attach_and_check_model(printed)
        where = session.exec("import os; print(os.environ['SEER_SANDBOX_ID'])")
        assert where.stdout.strip() in started, "the kernel runs in the container"
    finally:
        for sandbox_id in started:
            DockerProvider().terminate(sandbox_id)


@pytest.fixture(scope="module")
def scoped(docker_engine: Any, hub: Any, volume: str) -> Any:
    config = docker_config(
        execution_mode="local",
        models=[{"name": MODEL_ID}],
        env=hub.env(),
        python_packages=PACKAGES,
        provider_options={"model_volume": volume},
    )
    sandbox = ScopedSandbox(config)
    try:
        sandbox.start(name="scoped-docker")
        yield sandbox
    finally:
        sandbox.terminate()


def test_seed_interface_served_from_docker(scoped: Any, tmp_path: Path) -> None:
    path = tmp_path / "interface.py"
    path.write_text(SEED_INTERFACE)
    served = scoped.serve(path, expose_as=None)
    assert isinstance(served, ServedInterface)
    assert served.url.startswith("http://127.0.0.1:") and served.sandbox_id.startswith("docker-")
    client = served.client(timeout=120)
    out = client.call("get_activations", "The quick brown fox", layer=1)
    assert out["layer"] == 1 and out["shape"][1] == 64
    tensor = client.call("get_activations_tensor", "The quick brown fox", 1)
    assert list(tensor.shape) == out["shape"]
    # and as the library an agent imports, from a process of its own
    library = scoped.serve(path, expose_as="library", name="tools")
    library.install_into(tmp_path / "lib")
    agent = subprocess.run(
        [sys.executable, "-c", "import json, tools; print(json.dumps(tools.get_activations('hi', layer=0)))"],
        cwd=tmp_path / "lib",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert agent.returncode == 0, agent.stderr[-2000:]
    assert json.loads(agent.stdout)["layer"] == 0

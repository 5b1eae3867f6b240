"""The seed examples on seer-modal, through the real modal SDK against the fake control plane.

Seed 004's notebook flow (a setup script prints JSON and exits; the agent attaches to the session
it names) and seed 002's interface served in all four expose modes, each on the default path and
on the GPU-request path (the SDK's older create calls; the fake runs it on CPU). After the
notebook flow's setup script, the agent's MCP server attaches as the seed says and writes the
notebook too, and ``seer down`` keeps every writer's cell (``tests/_seed_notebook.py``). The
scripts are the seeds' but for ``provider="modal"`` and what this machine needs: the tiny model
served by a hub-compatible server on 127.0.0.1, torch from the local CPU wheel, packages from
local mirrors.

Every sandbox here uses the same image (the notebook mode's packages are the scoped sandboxes'
too), so only the module's first start may build layers (none when an earlier fake on the engine
built them: the session's fakes keep their layers, as Modal does) and downloads the model into
the module's own Volume: each later start must build no layer and download 0 bytes.
"""

from __future__ import annotations

import importlib.util
import json
import re
import secrets
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _modal_kit import PIP_OPTIONS, modal_config
from _model_kit import MODEL_ID, tiny_dirs
from _seed_kit import PACKAGES, attach_and_check_model, printed_by, run_setup, setup_script
from _seed_notebook import agent_then_teardown_keeps_every_cell
from seer.notebook.server import NotebookMode
from seer_modal.testing import FakeModal
from test_scoped import SEED_INTERFACE

# The first start builds an image with torch and Jupyter in it: minutes, not seconds.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.usefixtures("no_leaked_sandboxes"),
]

#: What a model-loading sandbox installs (``PACKAGES``), then what notebook mode and the model
#: fetcher add, in the order core adds them: the notebook and the scoped sandboxes ask for the same
#: list, so they share every image layer.
NOTEBOOK_PACKAGES = [*PACKAGES, *NotebookMode.required_packages, "huggingface_hub>=1"]
PATHS = {"default": None, "gpu": "A100"}


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The tiny model on 127.0.0.1 (the fake's sandboxes share the host's network)."""
    from seer.testing.hub_server import HubServer

    worker = request.getfixturevalue("worker_id") if "worker_id" in request.fixturenames else "master"
    with HubServer({MODEL_ID: tiny_dirs(tmp_path_factory, worker).model}) as server:
        yield server


@pytest.fixture(scope="module")
def volume() -> str:
    """A model Volume of this module's own, so what it downloads is measured from empty."""
    return f"seer-test-models-{secrets.token_hex(4)}"


@pytest.fixture(scope="module")
def starts() -> list[str]:
    """The sandboxes this module has started, in order: a start after the first must build no
    image layer and download no model byte."""
    return []


def _check_cached(fake: FakeModal, hub: Any, starts: list[str], before: tuple[int, int]) -> None:
    """The start just made built and downloaded only if it was the module's first."""
    layers, downloaded = before
    if starts:  # the image and the model were there already: nothing built, nothing downloaded
        assert fake.layers_built == layers, f"a start after {starts} built image layers"
        assert hub.bytes_served == downloaded, f"a start after {starts} downloaded model bytes"
    else:  # the first start fetched the model into the module's own, empty Volume
        assert hub.bytes_served > downloaded


def _options(volume: str) -> dict[str, str]:
    return {"model_volume": volume, "pip_options": PIP_OPTIONS}


def _started(fake: FakeModal, before: set[str]) -> list[str]:
    return [i for i, s in fake.state.sandboxes.items() if i not in before and s.result is None]


@pytest.mark.parametrize("path", ["default", "gpu"])
def test_seed_notebook_flow(
    path: str, fake_modal: FakeModal, hub: Any, volume: str, starts: list[str], tmp_path: Path
) -> None:
    from seer_modal.provider import ModalProvider

    script = setup_script("modal", _options(volume), hub.env(), gpu=PATHS[path])
    before = set(fake_modal.state.sandboxes)
    layers, downloaded = fake_modal.layers_built, hub.bytes_served
    out = run_setup(script, tmp_path, timeout=1100)
    started = _started(fake_modal, before)
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        assert len(started) == 1, started
        record = fake_modal.state.sandboxes[started[0]]
        assert (record.gpu, record.version) == (("A100-40GB", 1) if path == "gpu" else (None, 2))
        printed = printed_by(out)
        # jupyter_url is one of the sandbox's tunnels (plain HTTP on the fake's loopback)
        url = urllib.parse.urlsplit(printed["jupyter_url"])
        assert url.hostname == "127.0.0.1" and url.port in {t.port for t in record.tunnels}
        # The setup script has exited; the agent attaches to the session it printed.
        session = attach_and_check_model(printed)
        where = session.exec("import os; print(os.environ['SEER_SANDBOX_ID'])")
        assert where.stdout.strip() == f"modal-{started[0]}", "the kernel runs in the sandbox"
        # the agent's MCP server writes the same notebook; seer down keeps every cell
        agent_then_teardown_keeps_every_cell(printed, f"modal-{started[0]}", session)
        _check_cached(fake_modal, hub, starts, (layers, downloaded))
        starts.append(f"notebook-{path}")
    finally:
        for modal_id in started:
            ModalProvider().terminate(f"modal-{modal_id}")


@pytest.fixture(scope="module", params=["default", "gpu"])
def scoped(
    request: pytest.FixtureRequest, fake_modal: FakeModal, hub: Any, volume: str, starts: list[str]
) -> Iterator[Any]:
    from seer import ScopedSandbox

    config = modal_config(
        execution_mode="local",
        gpu=PATHS[request.param],
        models=[{"name": MODEL_ID}],
        env=hub.env(),
        python_packages=NOTEBOOK_PACKAGES,
        provider_options=_options(volume),
    )
    layers, downloaded = fake_modal.layers_built, hub.bytes_served
    sandbox = ScopedSandbox(config)
    try:
        sandbox.start(name=f"scoped-modal-{request.param}")
        _check_cached(fake_modal, hub, starts, (layers, downloaded))
        starts.append(f"scoped-{request.param}")
        yield sandbox
    finally:
        sandbox.terminate()


@pytest.fixture
def interface(tmp_path: Path) -> Path:
    path = tmp_path / "interface.py"
    path.write_text(SEED_INTERFACE)
    return path


def _agent(code: str, cwd: Path) -> Any:
    """Run ``code`` as an agent's script, in a process of its own; its last line as JSON."""
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_seed_interface_in_four_expose_modes(
    scoped: Any, fake_modal: FakeModal, interface: Path, tmp_path: Path
) -> None:
    """One serve, as seed 002 does it: the four exposures share one server (and its token), so
    the RPC client and every mode's agent below talk to the same interface process."""
    from seer.rpc import ServedInterface

    # the provider matrix runs this with only core and seer-modal installed: mcp needs seer[mcp]
    has_mcp = importlib.util.find_spec("seer_mcp") is not None
    modes = ["library", "mcp", "prompt", "skill"] if has_mcp else ["library", "prompt", "skill"]
    exposed = scoped.serve(interface, expose_as=modes, name="tools")
    # RPC: the served URL is a tunnel of the sandbox
    served = scoped.served["tools"]
    assert isinstance(served, ServedInterface) and served.sandbox_id == scoped.sandbox_id
    record = fake_modal.state.sandboxes[scoped.sandbox_id.removeprefix("modal-")]
    assert (record.gpu, record.version) == (("A100-40GB", 1) if scoped.config.gpu else (None, 2))
    assert urllib.parse.urlsplit(served.url).port in {t.port for t in record.tunnels}
    out = served.client(timeout=120).call("get_activations", "The quick brown fox", layer=1)
    assert out["layer"] == 1 and out["shape"][1] == 64

    # library: the agent imports it
    exposed["library"].install_into(tmp_path / "lib")
    got = _agent(
        "import json, tools; print(json.dumps(tools.get_activations('hi', layer=0)))", tmp_path / "lib"
    )
    assert got["layer"] == 0

    # prompt: a script written from the prompt text alone
    text = exposed["prompt"]
    snippet = re.findall(r"```python\n(.*?)```", text, re.DOTALL)[0]
    call = re.search(r"Call: `(tools\.call\(\"get_activations\".*?)`", text)
    assert call is not None, text
    got = _agent(snippet + f"\nimport json\nprint(json.dumps({call.group(1)}))\n", tmp_path)
    assert got["layer"] == 0 and got["shape"][1] == 64

    # skill: SKILL.md's own example, from its folder
    folder = exposed["skill"].install_into(tmp_path / "skills")
    example = re.findall(r"```python\n(.*?)```", (folder / "SKILL.md").read_text(), re.DOTALL)[0]
    example = example.replace("<this skill's folder>", str(folder))
    example = re.sub(
        r"print\((tools\.get_activations\(.*?\))\)", r"import json; print(json.dumps(\1))", example
    )
    assert _agent(example, tmp_path)["layer"] == 0

    # mcp: the stdio server config the agent's harness runs, called through the MCP SDK
    if not has_mcp:
        pytest.skip("library, prompt and skill passed; the mcp mode needs seer[mcp], not installed here")
    from _mcp_client import McpClient, server_env

    config = dict(exposed["mcp"])
    with McpClient(config["args"], server_env(config["env"]), command=config["command"]) as client:
        assert {t.name for t in client.tools()} >= {"get_activations", "get_activations_tensor"}
        result = client.call("get_activations", {"prompt": "hi", "layer": 1})
        assert not result.is_error
        assert result.structured_content["result"]["layer"] == 1

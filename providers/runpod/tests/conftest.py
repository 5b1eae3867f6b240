"""The seer-runpod tests run the real runpod SDK against ``FakeRunPod`` on 127.0.0.1, whose pods
are real SSH-able containers.

``SEER_HOME`` is a fresh folder for the run unless seer's own tests/conftest.py made one already.
One ``fake_runpod`` serves the whole session (it skips, saying why, without a Docker engine), its
pods' system Python holding this client's ML packages (``fake_runpod_python_packages``); a
module that uses ``no_leaked_pods`` fails if a pod container of it is left at its end. Without the
runpod SDK or seer-runpod installed, nothing here is collected.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if any(importlib.util.find_spec(name) is None for name in ("runpod", "seer_runpod", "paramiko", "graphql")):
    collect_ignore_glob = ["test_*.py"]
else:
    from seer_runpod.testing import FakeRunPod
    from seer_runpod.testing.pytest_plugin import fake_runpod  # noqa: F401  (the fixture)

    @pytest.fixture(scope="session")
    def fake_runpod_python_packages() -> list[str]:
        """Pods have this client's torch, transformers, accelerate and Jupyter in their system
        Python, as RunPod's pytorch images have torch: a sandbox's environment installs nothing
        heavy (each package set is still made, on the volume, and reused)."""
        from seer_ssh.testing import client_pins

        return client_pins()

    @pytest.fixture(scope="module")
    def no_leaked_pods(request: pytest.FixtureRequest, fake_runpod: FakeRunPod) -> Iterator[None]:  # noqa: F811
        yield
        live = [pod.id for pod in fake_runpod.pods.values() if pod.terminated_by is None]
        for pod_id in live:
            fake_runpod.terminate(pod_id, "user")
        assert not live, f"{request.module.__name__} left pods running: {live}"

    if "seer-test-home-" not in os.environ.get("SEER_HOME", ""):
        _home = Path(tempfile.mkdtemp(prefix="seer-test-home-"))
        os.environ["SEER_HOME"] = str(_home)
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["HF_HOME"] = str(_home / "hf-home")
        os.environ["SEER_OUTPUTS_DIR"] = str(_home / "outputs")
        for name in (
            "HF_HUB_CACHE",
            "HF_TOKEN",
            "SEER_PROVIDER",
            "SEER_LOAD_PLUGINS",
            "SEER_DISABLE_PLUGINS",
        ):
            os.environ.pop(name, None)
    # seer's shared test helpers (_model_kit, the seed examples) live in the repository's tests/
    _shared = Path(__file__).resolve().parents[3] / "tests"
    if _shared.is_dir() and str(_shared) not in sys.path:
        sys.path.append(str(_shared))

    @pytest.fixture(scope="module")
    def volume(fake_runpod: FakeRunPod) -> str:  # noqa: F811
        """A network volume of this module's own: the model cache and environments of its pods."""
        return fake_runpod.add_network_volume(f"seer-tests-{os.getpid()}-{len(fake_runpod.network_volumes)}")

    @pytest.fixture(scope="module")
    def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
        """The tiny model served on 127.0.0.1 (host networking lets pods reach it)."""
        from _model_kit import MODEL_ID, tiny_dirs
        from seer.testing.hub_server import HubServer

        dirs = tiny_dirs(tmp_path_factory, "master")
        with HubServer({MODEL_ID: dirs.model}) as server:
            yield server

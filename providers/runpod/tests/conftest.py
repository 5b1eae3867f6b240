"""The seer-runpod tests run the real runpod SDK against ``FakeRunPod`` on 127.0.0.1, whose pods
are real SSH-able containers.

One ``fake_runpod`` serves the whole session (it skips, saying why, without a Docker engine), its
pods' system Python holding this client's ML packages (``fake_runpod_python_packages``); a
module that uses ``no_leaked_pods`` fails if a pod container of it is left at its end. Without the
runpod SDK or seer-runpod installed, nothing here is collected.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
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

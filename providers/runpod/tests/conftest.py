"""The seer-runpod tests run the real runpod SDK against ``FakeRunPod`` on 127.0.0.1, whose pods
are real SSH-able containers.

One ``fake_runpod`` serves the whole session (it skips, saying why, without a Docker engine); a
module that uses ``no_leaked_pods`` fails if a pod container of it is left at its end. Without the
runpod SDK or seer-runpod installed, nothing here is collected.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

if any(importlib.util.find_spec(name) is None for name in ("runpod", "seer_runpod", "paramiko", "graphql")):
    collect_ignore_glob = ["test_*.py"]
else:
    from seer_runpod.testing import FakeRunPod
    from seer_runpod.testing.pytest_plugin import fake_runpod  # noqa: F401  (the fixture)

    @pytest.fixture(scope="module")
    def no_leaked_pods(request: pytest.FixtureRequest, fake_runpod: FakeRunPod) -> Iterator[None]:  # noqa: F811
        yield
        live = [pod.id for pod in fake_runpod.pods.values() if pod.terminated_by is None]
        for pod_id in live:
            fake_runpod.terminate(pod_id, "user")
        assert not live, f"{request.module.__name__} left pods running: {live}"

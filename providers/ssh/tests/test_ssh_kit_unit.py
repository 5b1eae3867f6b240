"""The SSH test kit's own edges, without an engine."""

from __future__ import annotations

import sys

import pytest
from seer_ssh.testing.host import docker_client, engine_problem

pytestmark = pytest.mark.unit


def test_the_test_kit_without_docker_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kit's hosts are containers: without the docker package (seer-ssh[testing], which
    seer-runpod[testing] pulls) it names the extra, and the suites skip with that reason."""
    monkeypatch.setitem(sys.modules, "docker", None)  # import docker -> ModuleNotFoundError
    with pytest.raises(ImportError, match=r'pip install "seer-ssh\[testing\]"'):
        docker_client()
    assert 'pip install "seer-ssh[testing]"' in (engine_problem() or "")

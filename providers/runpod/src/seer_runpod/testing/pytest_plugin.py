"""The ``fake_runpod`` pytest fixture: one :class:`FakeRunPod` per test session, the runpod SDK
of the test process pointed at it. Import it into a ``conftest.py``::

    from seer_runpod.testing.pytest_plugin import fake_runpod  # noqa: F401

Tests using it skip, saying why, when no Docker engine (or no local base image) is there. A
``conftest.py`` that overrides ``fake_runpod_python_packages`` gives every pod's system Python those
packages (``FakeRunPod(python_packages=...)``), as RunPod's pytorch images have torch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from seer_runpod.testing.fake import FakeRunPod

__all__ = ["fake_runpod", "fake_runpod_python_packages"]


@pytest.fixture(scope="session")
def fake_runpod_python_packages() -> Sequence[str]:
    """The pip requirements in every pod's system Python: none (override it in a conftest.py)."""
    return ()


@pytest.fixture(scope="session")
def fake_runpod(fake_runpod_python_packages: Sequence[str]) -> Iterator[FakeRunPod]:
    """A started fake RunPod API, active for the runpod SDK; every pod it made is removed after."""
    problem = FakeRunPod.problem()
    if problem:
        pytest.skip(f"no fake RunPod here: {problem}")
    with FakeRunPod(python_packages=fake_runpod_python_packages) as fake, fake.activate():
        yield fake

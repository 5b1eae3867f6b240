"""The ``fake_runpod`` pytest fixture: one :class:`FakeRunPod` per test session, the runpod SDK
of the test process pointed at it. Import it into a ``conftest.py``::

    from seer_runpod.testing.pytest_plugin import fake_runpod  # noqa: F401

Tests using it skip, saying why, when no Docker engine (or no local base image) is there.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from seer_runpod.testing.fake import FakeRunPod

__all__ = ["fake_runpod"]


@pytest.fixture(scope="session")
def fake_runpod() -> Iterator[FakeRunPod]:
    """A started fake RunPod API, active for the runpod SDK; every pod it made is removed after."""
    problem = FakeRunPod.problem()
    if problem:
        pytest.skip(f"no fake RunPod here: {problem}")
    with FakeRunPod() as fake, fake.activate():
        yield fake

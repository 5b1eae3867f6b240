"""The ``fake_modal`` pytest fixture: one :class:`FakeModal` per test session, the modal SDK
of the test process pointed at it. It keeps the image layers it builds on the engine, so the
session's other workers and later sessions reuse them (as Modal's layer cache would). Import it
into a ``conftest.py``::

    from seer_modal.testing.pytest_plugin import fake_modal  # noqa: F401

Tests using it skip, saying why, when no Docker engine (or no local base image) is there.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from seer_modal.testing.fake import FakeModal

__all__ = ["fake_modal"]


@pytest.fixture(scope="session")
def fake_modal() -> Iterator[FakeModal]:
    """A started fake Modal server, active for the modal SDK; all it made is removed after."""
    problem = FakeModal.problem()
    if problem:
        pytest.skip(f"no fake Modal here: {problem}")
    with FakeModal(keep_layers=True) as fake, fake.activate():
        yield fake

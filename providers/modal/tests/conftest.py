"""The seer-modal tests run the real modal SDK against the fake control plane on 127.0.0.1.

One ``fake_modal`` serves the whole session (it skips, saying why, without a Docker engine); a
module that uses ``no_leaked_sandboxes`` fails if a sandbox container of it is left at its end.
Without the modal SDK installed (seer-modal not installed), nothing here is collected.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator

import pytest

if importlib.util.find_spec("modal") is None or importlib.util.find_spec("seer_modal") is None:
    collect_ignore_glob = ["test_*.py"]
else:
    from seer_modal.testing import FakeModal
    from seer_modal.testing.pytest_plugin import fake_modal  # noqa: F401  (the fixture)

    @pytest.fixture(scope="module")
    def no_leaked_sandboxes(request: pytest.FixtureRequest, fake_modal: FakeModal) -> Iterator[None]:  # noqa: F811
        yield
        deadline = time.monotonic() + 10
        while fake_modal.containers() and time.monotonic() < deadline:
            time.sleep(0.2)
        leaked = fake_modal.containers()
        for container in leaked:
            container.remove(force=True)
        assert not leaked, f"{request.module.__name__} left sandbox containers: {[c.name for c in leaked]}"

"""The seer-modal tests run the real modal SDK against the fake control plane on 127.0.0.1.

One ``fake_modal`` serves the whole session (it skips, saying why, without a Docker engine); a
module that uses ``no_leaked_sandboxes`` fails if a sandbox container of it is left at its end.
Without the modal SDK installed (seer-modal not installed), nothing here is collected.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# Run alone, these tests get the ground rules of seer's own tests/conftest.py: a SEER_HOME of their
# own, no model hub, and seer's shared test helpers (the tiny model, the seed examples) importable.
_TESTS = Path(__file__).resolve().parents[3] / "tests"
if "SEER_HOME" not in os.environ or "seer-test-home-" not in os.environ["SEER_HOME"]:
    _HOME = Path(tempfile.mkdtemp(prefix="seer-test-home-"))
    os.environ["SEER_HOME"] = str(_HOME)
    os.environ["HF_HOME"] = str(_HOME / "hf-home")
    os.environ["SEER_OUTPUTS_DIR"] = str(_HOME / "outputs")
os.environ["HF_HUB_OFFLINE"] = "1"
for _name in ("HF_HUB_CACHE", "HF_TOKEN", "SEER_PROVIDER", "SEER_LOAD_PLUGINS", "SEER_DISABLE_PLUGINS"):
    os.environ.pop(_name, None)
if _TESTS.is_dir() and str(_TESTS) not in sys.path:
    sys.path.append(str(_TESTS))

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

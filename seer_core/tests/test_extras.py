"""A bare seer-core without an optional client package says which extra to install.

``pip install seer-core`` (or ``seer`` with no extra) leaves out websocket-client; a notebook
session then needs it. The error must name the package and the extra, as a
:class:`~seer.errors.MissingExtraError` (a SeerError and an ImportError), and come before a
kernel is started that nothing could reach. The same holds in the sandbox for the packages
that load models. Missing packages are simulated with ``sys.modules[name] = None``, which makes
``import name`` fail exactly as for an absent package.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from _notebook_kit import local_sandbox
from seer import Sandbox
from seer.errors import MissingExtraError, SeerError

pytestmark = pytest.mark.unit

pytest.importorskip("jupyter_server")


@pytest.fixture(scope="module")
def notebook_sandbox() -> Iterator[Sandbox]:
    with local_sandbox(timeout=600) as sandbox:
        yield sandbox


@pytest.mark.e2e
def test_notebook_session_without_websocket_client_names_the_extra(
    notebook_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seer.execution import create_notebook_session
    from seer.notebook import JupyterClient

    service = notebook_sandbox.services["jupyter"]
    client = JupyterClient(service["url"], service["token"])
    kernels_before = {k["id"] for k in client.call("GET", "/api/kernels")}
    monkeypatch.setitem(sys.modules, "websocket", None)

    with pytest.raises(MissingExtraError) as info:
        create_notebook_session(notebook_sandbox, outputs_dir=False)

    message = str(info.value)
    assert "websocket-client" in message
    assert 'pip install "seer[notebook]>=0.2"' in message
    assert "notebook session" in message
    assert isinstance(info.value, SeerError) and isinstance(info.value, ImportError)
    assert info.value.extra == "notebook"
    # Refused before anything was made: no kernel was started for a session that cannot talk to it.
    assert {k["id"] for k in client.call("GET", "/api/kernels")} == kernels_before


def test_loading_models_without_torch_or_transformers_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    from seer.runtime.loading import load_model

    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(MissingExtraError) as info:
        load_model({"path": str(tmp_path), "var_name": "model"})
    message = str(info.value)
    assert "needs torch" in message
    assert "python_packages" in message and '"seer[models]>=0.2"' in message

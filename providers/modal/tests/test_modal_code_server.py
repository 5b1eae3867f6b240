"""``debug=True`` on Modal (issue #28): code-server in an image layer, in a real browser.

The real modal SDK against the fake control plane; each sandbox a real container. The sandboxes
name the local provider's tools folder (``scripts/code-server`` makes it; CI runs it first) as
``provider_options.code_server_from``: the image gets it as a layer of its own
(``Image.add_local_dir(copy=True)``: the SDK uploads its files to the fake's content store once,
the fake builds the layer from them), right after the base. A second start uploads and builds
nothing (counted: no ``MountPutFile`` or ``BlobCreate`` call, no layer built, the debug step
installs nothing). A person opens ``code_server_url`` (the sandbox's tunnel) in chromium: refused
without the password, VS Code on the working directory with it. The screenshot is kept:
``$SEER_TEST_ARTEFACTS``/code-server-modal.png.
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _browser import assert_gone, check_code_server
from _code_server_kit import MARKER, prepared_or_skip, started, write_project
from _modal_kit import modal_config
from seer import Sandbox
from seer.errors import ConfigError
from seer.providers import code_server as installer
from seer_modal.image import TOOLS_DIR
from seer_modal.testing import FakeModal

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.usefixtures("no_leaked_sandboxes")]

#: Run the in-image build of code-server too (6-11 minutes; CI builds code-server once, locally).
BUILD = os.environ.get("SEER_TEST_CODE_SERVER_BUILD") == "1"
#: The calls that send a mount's files.
UPLOADS = ("MountPutFile", "BlobCreate")


@pytest.fixture(scope="module")
def prepared() -> str:
    return prepared_or_skip()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("debug"))


def _config(project: Path, **options: Any) -> Any:
    return modal_config(debug=True, local_files=[(str(project), "hello_debug.py")], provider_options=options)


@pytest.fixture(scope="module")
def first(fake_modal: FakeModal, project: Path, prepared: str) -> Iterator[tuple[Sandbox, int]]:
    uploads = sum(fake_modal.call_counts()[c] for c in UPLOADS)
    box = Sandbox(_config(project, code_server_from=prepared), progress=False).start()
    try:
        yield box, sum(fake_modal.call_counts()[c] for c in UPLOADS) - uploads
    finally:
        box.terminate(force=True)


def test_a_person_opens_vs_code_in_the_browser(first: tuple[Sandbox, int]) -> None:
    sandbox, _ = first
    assert sandbox.services["code_server"]["root"] == installer.layout(TOOLS_DIR)["root"]
    url = str(sandbox.code_server_url)
    assert f"folder={sandbox.machine.workdir.replace('/', '%2F')}" in url
    check_code_server(
        url, str(sandbox.code_server_password), "hello_debug.py", MARKER, "code-server-modal.png"
    )


def test_the_layer_is_the_prepared_install_and_a_second_start_uploads_and_builds_nothing(
    fake_modal: FakeModal, first: tuple[Sandbox, int], project: Path, prepared: str
) -> None:
    sandbox, _ = first
    root = installer.layout(TOOLS_DIR)["root"]
    # the client's install as it is (its installs.log included), less its npm shim (it names the
    # client's path) and no compiler: copied, never built
    log = sandbox.read_file(installer.layout(TOOLS_DIR)["installs"]).splitlines()
    assert log == Path(installer.layout(prepared)["installs"]).read_text().splitlines()
    probe = sandbox.exec(["bash", "-c", f"test ! -e {root}/shim && ! command -v c++ make"], timeout=60)
    assert probe.exit_code == 0, probe.output
    calls = fake_modal.call_counts()
    layers = fake_modal.layers_built
    with started(_config(project, code_server_from=prepared)) as (second, second_lines):
        assert second.machine.id != sandbox.machine.id
        after = fake_modal.call_counts()
        assert {c: after[c] - calls[c] for c in (*UPLOADS, "ImageGetOrCreate")} == {
            "MountPutFile": 0, "BlobCreate": 0, "ImageGetOrCreate": 0
        }  # fmt: skip
        assert fake_modal.layers_built == layers
        assert not any("installed code-server" in line for line in second_lines), second_lines
        assert second.read_file(installer.layout(TOOLS_DIR)["installs"]).splitlines() == log
        port = second.services["code_server"]["port"]
    assert_gone(port)


def test_a_folder_without_an_install_is_refused_before_anything(
    fake_modal: FakeModal, project: Path, tmp_path: Path
) -> None:
    before = len(fake_modal.calls)
    with pytest.raises(ConfigError, match="code_server_from") as refused:
        Sandbox(_config(project, code_server_from=str(tmp_path))).start()
    assert "no complete install of code-server" in str(refused.value)
    assert fake_modal.calls[before:] == []


@pytest.mark.timeout(2400)
@pytest.mark.skipif(
    not BUILD,
    reason="the prepared install covers the sandbox's runtime; set SEER_TEST_CODE_SERVER_BUILD=1 to "
    "build code-server in the image too (6-11 minutes: apt, the package index and npm)",
)
def test_without_a_prepared_install_the_layer_builds_code_server(
    fake_modal: FakeModal, project: Path
) -> None:
    """No ``code_server_from``: the layer installs the compilers and runs the installer (Node from
    the package index, code-server from npm) in the image; the sandbox runs what it built."""
    box = Sandbox(_config(project), progress=False).start()
    try:
        log = box.read_file(installer.layout(TOOLS_DIR)["installs"]).splitlines()
        assert len(log) == 1 and "installed code-server" in log[0], log
        with urllib.request.urlopen(f"{box.services['code_server']['url']}/healthz", timeout=30) as resp:
            assert resp.status == 200
        port = box.services["code_server"]["port"]
    finally:
        box.terminate(force=True)
    assert_gone(port)

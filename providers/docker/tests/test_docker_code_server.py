"""``debug=True`` on Docker (issue #28): code-server from the image's debug layer, in a real browser.

The first start builds the image's code-server layer (minutes, once per base image: the Docker
engine caches it); a start finds code-server installed and installs nothing, and a second
sandbox's image build adds no layer and runs no install (counted: the image's ``installs.log``
has one line, and the debug step reported nothing installed). A person opens
``code_server_url`` in chromium: refused without the password, VS Code on the working directory
with it. The screenshot is kept: ``$SEER_TEST_ARTEFACTS``/code-server-docker.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _browser import assert_gone, check_code_server
from _docker_kit import docker_config
from seer import Sandbox
from seer.progress import Progress
from seer.providers import code_server as installer
from seer_docker.image import TOOLS_DIR


def e2e(test):  # type: ignore[no-untyped-def]
    """A test that starts sandboxes (the first builds the image's debug layer: minutes)."""
    return pytest.mark.e2e(pytest.mark.slow(pytest.mark.timeout(2400)(test)))


MARKER = "SEER_DEBUG_MARKER = 28"


def _installs(sandbox: Sandbox) -> list[str]:
    log = installer.layout(TOOLS_DIR)["installs"]
    return sandbox.read_file(log).splitlines()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("debug") / "hello_debug.py"
    path.write_text(f"{MARKER}\nprint(SEER_DEBUG_MARKER)\n")
    return path


@pytest.fixture(scope="module")
def sandbox(project: Path) -> Iterator[Sandbox]:
    box = Sandbox(docker_config(debug=True, local_files=[(str(project), "hello_debug.py")])).start()
    try:
        yield box
    finally:
        box.terminate(force=True)


@e2e
def test_a_person_opens_vs_code_in_the_browser(sandbox: Sandbox) -> None:
    assert sandbox.services["code_server"]["root"].startswith(TOOLS_DIR + "/")
    url = str(sandbox.code_server_url)
    assert f"folder={sandbox.machine.workdir.replace('/', '%2F')}" in url
    check_code_server(
        url, str(sandbox.code_server_password), "hello_debug.py", MARKER, "code-server-docker.png"
    )


@e2e
def test_code_server_came_from_the_image_and_a_second_start_installs_nothing(
    project: Path, sandbox: Sandbox
) -> None:
    # installed once, when the image's debug layer was built; never by a start
    assert len(_installs(sandbox)) == 1
    lines: list[str] = []
    second = Sandbox(
        docker_config(debug=True, local_files=[(str(project), "hello_debug.py")]),
        progress=_Recorder(lines),
    ).start()
    try:
        assert len(_installs(second)) == 1
        assert not any("installed code-server" in line for line in lines), lines
        assert not any("Step" in line and "seer-code-server-install" in line for line in lines), lines
        # the sandbox image (debug layer included) came from the engine's cache: nothing was built
        assert any("is cached: nothing to build" in line for line in lines), lines
        assert not any(line.startswith("building image") for line in lines), lines
        python = second.read_file(".seer/code-server/data/User/settings.json")
        assert second.machine.python in python
        port = second.services["code_server"]["port"]
    finally:
        second.terminate(force=True)
    assert_gone(port)


@pytest.mark.unit
def test_the_debug_layer_comes_first_and_only_with_debug() -> None:
    from seer_docker.image import CODE_SERVER_INSTALLER, render_dockerfile

    args = {"system_packages": ["curl"], "python_packages": ["rich"], "wheel_name": "w.whl", "workdir": "/w"}
    plain = render_dockerfile("base", **args)  # type: ignore[arg-type]
    debug = render_dockerfile("base", code_server=True, **args)  # type: ignore[arg-type]
    assert "code-server" not in plain and CODE_SERVER_INSTALLER not in plain
    lines = debug.splitlines()
    # right after FROM and ENV: shared by every debug config on the base, whatever its packages
    assert lines[2].startswith("# --- seer debug layer")
    assert lines[3] == f"COPY {CODE_SERVER_INSTALLER} /opt/seer/{CODE_SERVER_INSTALLER}"
    assert "libkrb5-dev" in lines[4] and f"{CODE_SERVER_INSTALLER} {TOOLS_DIR} " in lines[4]
    assert [line for line in lines if not line.startswith("#")][4:] == plain.splitlines()[2:]


class _Recorder(Progress):
    """Progress that keeps every line it is told (the image build's output included)."""

    def __init__(self, lines: list[str]):
        super().__init__(enabled=False)
        self.lines = lines

    def update(self, text: str) -> None:
        self.lines.append(text)

    def note(self, text: str) -> None:
        self.lines.append(text)

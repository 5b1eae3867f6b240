"""``debug=True`` on Docker (issue #28): code-server from the image's debug layer, in a real browser.

Where this machine has a complete code-server install in the local provider's tools folder
(``scripts/code-server`` makes it; CI runs it first), the sandboxes here name it as
``provider_options.code_server_from``: the debug layer copies it into the image (a minute) rather
than building code-server there (apt, compilers, npm: 6-11 minutes on two cores), and the image
that runs is the same. Without one they build it as a user's image does. The one test of the
in-image build next to a prepared install, :func:`test_the_debug_layer_builds_code_server_in_the_image`,
runs only with ``SEER_TEST_CODE_SERVER_BUILD=1`` (CI builds code-server once, for the local tools
folder, not twice).

The first start builds the image's code-server layer (once per base image and install: the
Docker engine caches it); a start finds code-server installed and installs nothing, and a second
sandbox's image build adds no layer and runs no install (counted: the image's ``installs.log``
is the one the layer made, and the debug step reported nothing installed). A person opens
``code_server_url`` in chromium: refused without the password, VS Code on the working directory
with it. The screenshot is kept: ``$SEER_TEST_ARTEFACTS``/code-server-docker.png.
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _browser import assert_gone, check_code_server
from _code_server_kit import MARKER, PREPARED, started, write_project
from _docker_kit import docker_config
from seer import Sandbox
from seer.providers import code_server as installer
from seer_docker.image import TOOLS_DIR


def e2e(test):  # type: ignore[no-untyped-def]
    """A test that starts sandboxes (the first builds the image's debug layer: minutes)."""
    return pytest.mark.e2e(pytest.mark.slow(pytest.mark.timeout(2400)(test)))


#: Run the in-image build of code-server even where a prepared install exists (6-11 minutes).
BUILD = os.environ.get("SEER_TEST_CODE_SERVER_BUILD") == "1"


def _debug_config(project: Path, **options: Any) -> Any:
    """A debug=True config; code-server copied from :data:`PREPARED` where there is one."""
    if PREPARED:
        options.setdefault("code_server_from", PREPARED)
    return docker_config(debug=True, local_files=[(str(project), "hello_debug.py")], provider_options=options)


def _expected_installs() -> int | list[str]:
    """What the image's installs.log holds: the prepared install's own log, or one build's line."""
    if PREPARED:
        return Path(installer.layout(PREPARED)["installs"]).read_text().splitlines()
    return 1


def _installs(sandbox: Sandbox) -> list[str]:
    log = installer.layout(TOOLS_DIR)["installs"]
    return sandbox.read_file(log).splitlines()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("debug"))


@pytest.fixture(scope="module")
def sandbox(project: Path) -> Iterator[Sandbox]:
    box = Sandbox(_debug_config(project)).start()
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
    # installed once, when the image's debug layer was built (or on the client); never by a start
    expected = _expected_installs()
    installs = _installs(sandbox)
    assert (installs if PREPARED else len(installs)) == expected
    if PREPARED:
        # copied, not built: no compiler came into the image, and the install's npm shim (it
        # names the client's path; only the install used it) stayed behind
        probe = sandbox.exec(["bash", "-c", "command -v c++ g++ make; ls " + _root() + "/shim"])
        assert probe.exit_code != 0 and not probe.stdout.strip(), probe.output
    with started(_debug_config(project)) as (second, lines):
        installs = _installs(second)
        assert (installs if PREPARED else len(installs)) == expected
        assert not any("installed code-server" in line for line in lines), lines
        assert not any("Step" in line and "seer-code-server-install" in line for line in lines), lines
        # the sandbox image (debug layer included) came from the engine's cache: nothing was built
        assert any("is cached: nothing to build" in line for line in lines), lines
        assert not any(line.startswith("building image") for line in lines), lines
        python = second.read_file(".seer/code-server/data/User/settings.json")
        assert second.machine.python in python
        port = second.services["code_server"]["port"]
    assert_gone(port)


def _root() -> str:
    return installer.layout(TOOLS_DIR)["root"]


@e2e
@pytest.mark.skipif(
    bool(PREPARED) and not BUILD,
    reason="a prepared code-server install covers the image's runtime; set "
    "SEER_TEST_CODE_SERVER_BUILD=1 to build code-server in the image too (6-11 minutes)",
)
def test_the_debug_layer_builds_code_server_in_the_image(project: Path) -> None:
    """The in-image build (no ``code_server_from``): apt's compilers, Node from the package index,
    code-server from npm, in the debug layer; the sandbox runs it."""
    with started(docker_config(debug=True, local_files=[(str(project), "hello_debug.py")])) as (box, lines):
        assert len(_installs(box)) == 1
        assert not any("installed code-server" in line for line in lines), lines
        assert box.services["code_server"]["root"] == _root()
        with urllib.request.urlopen(f"{box.services['code_server']['url']}/healthz", timeout=30) as resp:
            assert resp.status == 200
        port = box.services["code_server"]["port"]
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


@pytest.mark.unit
def test_a_prepared_install_is_copied_not_built() -> None:
    from seer_docker.image import CODE_SERVER_INSTALLER, CODE_SERVER_PREPARED, render_dockerfile

    args = {"system_packages": [], "python_packages": [], "wheel_name": "w.whl", "workdir": "/w"}
    built = render_dockerfile("base", code_server=True, **args)  # type: ignore[arg-type]
    copied = render_dockerfile("base", code_server=True, code_server_prepared=True, **args)  # type: ignore[arg-type]
    lines = copied.splitlines()
    assert lines[2].startswith("# --- seer debug layer") and "prepared on the client" in lines[2]
    assert lines[3] == f"COPY {CODE_SERVER_PREPARED}/ {_root()}/"
    # the only RUN of the layer checks that the install's Node runs on the base image
    assert lines[4].startswith(f"RUN {installer.layout(TOOLS_DIR)['node']} --version")
    assert "code_server_from" in lines[4]
    for absent in (CODE_SERVER_INSTALLER, "apt-get install -y -qq --no-install-recommends g++", "npm"):
        assert absent not in copied
    # the rest of the image is the same as the built layer's
    assert lines[5:] == built.splitlines()[5:]
    # without code_server, code_server_prepared adds nothing
    plain = render_dockerfile("base", **args)  # type: ignore[arg-type]
    assert render_dockerfile("base", code_server_prepared=True, **args) == plain  # type: ignore[arg-type]


def _fake_install(tools: Path) -> Path:
    """A tools folder shaped like a complete install (the files the options and the context read)."""
    where = installer.layout(str(tools))
    root = Path(where["root"])
    for key in ("node", "entry"):
        Path(where[key]).parent.mkdir(parents=True, exist_ok=True)
        Path(where[key]).write_text(key)
    (root / "shim").mkdir()
    (root / "shim" / "npm").write_text(f"#!/bin/sh\nexec {where['node']}\n")
    (root / "bin").mkdir()
    (root / "bin" / "code-server").symlink_to("../lib/node_modules/code-server/out/node/entry.js")
    Path(where["installs"]).write_text("1 installed\n")
    Path(where["complete"]).write_text(installer.VERSION + "\n")
    return root


@pytest.mark.unit
def test_code_server_from_must_name_a_complete_install(tmp_path: Path) -> None:
    from pydantic import ValidationError
    from seer_docker.options import DockerOptions

    with pytest.raises(ValidationError) as info:
        DockerOptions(code_server_from=str(tmp_path / "nowhere"))
    assert info.value.errors()[0]["loc"] == ("code_server_from",)
    assert "is not a folder" in str(info.value)
    root = _fake_install(tmp_path / "tools")
    (root / ".complete").unlink()  # an install that died half-way, or of another version
    with pytest.raises(ValidationError) as info:
        DockerOptions(code_server_from=str(tmp_path / "tools"))
    assert info.value.errors()[0]["loc"] == ("code_server_from",)
    assert f"no complete install of code-server {installer.VERSION}" in str(info.value)
    assert "scripts/code-server" in str(info.value)
    (root / ".complete").write_text(installer.VERSION + "\n")
    assert DockerOptions(code_server_from=str(tmp_path / "tools")).code_server_from == str(tmp_path / "tools")
    # the config's check names the field, before anything is provisioned
    from seer_docker.provider import DockerProvider

    config = docker_config(debug=True, provider_options={"code_server_from": str(tmp_path)})
    assert [p.field for p in DockerProvider.check_config(config)] == ["provider_options.code_server_from"]


@pytest.mark.unit
def test_the_image_key_follows_the_prepared_install(tmp_path: Path) -> None:
    import tarfile

    from seer_docker.image import CODE_SERVER_PREPARED, _context, prepared_fingerprint

    root = _fake_install(tmp_path)
    first = prepared_fingerprint(str(tmp_path))
    assert prepared_fingerprint(str(tmp_path)) == first
    entry = Path(installer.layout(str(tmp_path))["entry"])
    entry.write_text("entry, rebuilt")  # another size
    assert prepared_fingerprint(str(tmp_path)) != first
    second = prepared_fingerprint(str(tmp_path))
    os.utime(entry, ns=(1, 1))  # same size, another mtime
    assert prepared_fingerprint(str(tmp_path)) != second
    # the npm shim is not part of what the image gets: changing it changes nothing
    third = prepared_fingerprint(str(tmp_path))
    (root / "shim" / "npm").write_text("another path")
    assert prepared_fingerprint(str(tmp_path)) == third
    # the context: a temporary file on disk, links kept as links, the shim left out, root-owned
    with _context({"Dockerfile": b"FROM x\n"}, {CODE_SERVER_PREPARED: root}) as context:
        assert not isinstance(context, __import__("io").BytesIO)
        with tarfile.open(fileobj=context) as tar:
            members = {m.name: m for m in tar.getmembers()}
    assert "Dockerfile" in members and CODE_SERVER_PREPARED in members
    link = members[f"{CODE_SERVER_PREPARED}/bin/code-server"]
    assert link.issym() and link.linkname == "../lib/node_modules/code-server/out/node/entry.js"
    assert f"{CODE_SERVER_PREPARED}/.complete" in members
    assert not any("/shim" in name for name in members)
    assert {(m.uid, m.gid) for m in members.values()} == {(0, 0)}


@pytest.mark.unit
def test_code_server_from_without_debug_is_named_as_ignored(tmp_path: Path) -> None:
    """It does nothing without debug=True: warned (naming the field), not refused, since one
    provider_options block often serves runs with and without debug."""
    import warnings

    from seer_docker.provider import DockerProvider

    _fake_install(tmp_path / "tools")
    config = docker_config(debug=False, provider_options={"code_server_from": str(tmp_path / "tools")})
    with pytest.warns(UserWarning, match=r"provider_options\.code_server_from is ignored.*debug=True"):
        assert DockerProvider.check_config(config) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DockerProvider.check_config(docker_config(debug=False))  # not set: nothing said

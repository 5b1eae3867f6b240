"""``debug=True`` on the local provider (issue #28): code-server in the sandbox, in a real browser.

A person opens ``sandbox.code_server_url`` in chromium (Selenium + chromium-driver): without the
password every page is the login form; with it, VS Code shows a file of the working directory. A
second start installs nothing (the installs are counted in the tools folder's ``installs.log``),
and teardown leaves no code-server behind.

Skips, saying why, where chromium, chromium-driver or Selenium is missing, or where code-server is
not installed and cannot be (no package index, no compiler: ``scripts/code-server`` installs it,
``.ci/run`` calls it). The screenshot is kept: ``$SEER_TEST_ARTEFACTS``/code-server-local.png.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from _browser import assert_gone, check_code_server
from seer import Sandbox, SandboxConfig
from seer.errors import ConfigError
from seer.providers import code_server as installer
from seer.providers.local.provider import local_tools_dir


def e2e(test):  # type: ignore[no-untyped-def]
    """A test that starts sandboxes (the first may install code-server: minutes)."""
    return pytest.mark.e2e(pytest.mark.slow(pytest.mark.timeout(2400)(test)))


MARKER = "SEER_DEBUG_MARKER = 28"


def _installs() -> int:
    log = Path(installer.layout(str(local_tools_dir()))["installs"])
    return len(log.read_text().splitlines()) if log.is_file() else 0


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("debug") / "hello_debug.py"
    path.write_text(f"{MARKER}\nprint(SEER_DEBUG_MARKER)\n")
    return path


def _config(project: Path) -> SandboxConfig:
    return SandboxConfig(
        execution_mode="cli", debug=True, timeout=1800, local_files=[(str(project), "hello_debug.py")]
    )


@pytest.fixture(scope="module")
def sandbox(project: Path) -> Iterator[Sandbox]:
    if not installer.installed(str(local_tools_dir())):
        from seer.providers.local.provider import code_server_problem

        why = code_server_problem()
        if why:
            pytest.skip(why)
    before = _installs()
    box = Sandbox(_config(project)).start()
    try:
        # The first start installed it at most once (not at all where it was there already).
        assert _installs() - before in (0, 1)
        yield box
    finally:
        box.terminate(force=True)


@e2e
def test_a_person_opens_vs_code_in_the_browser(sandbox: Sandbox) -> None:
    url = str(sandbox.code_server_url)
    password = str(sandbox.code_server_password)
    assert len(password) >= 24
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert query["folder"] == [sandbox.machine.workdir]
    check_code_server(url, password, "hello_debug.py", MARKER, "code-server-local.png")


@e2e
def test_code_server_listens_on_loopback_with_its_secret_in_a_private_file(sandbox: Sandbox) -> None:
    service = sandbox.services["code_server"]
    assert service["url"] == f"http://127.0.0.1:{service['port']}"
    config = Path(sandbox.machine.resolve(".seer/code-server/config.yaml"))
    assert config.stat().st_mode & 0o777 == 0o600
    assert "bind-addr: 127.0.0.1:0" in config.read_text()
    # the password is in no process's command line
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        assert service["password"].encode() not in argv
    settings = json.loads(
        Path(sandbox.machine.resolve(".seer/code-server/data/User/settings.json")).read_text()
    )
    assert settings["python.defaultInterpreterPath"] == sandbox.machine.python
    # the sandbox's Python is the one that runs the project
    assert (
        sandbox.exec([settings["python.defaultInterpreterPath"], "hello_debug.py"], check=True).stdout
        == "28\n"
    )


@e2e
def test_a_second_start_installs_nothing_and_teardown_stops_it(project: Path, sandbox: Sandbox) -> None:
    before = _installs()
    second = Sandbox(_config(project)).start()
    try:
        assert _installs() == before, "the second start installed code-server again"
        assert second.code_server_password != sandbox.code_server_password
        port = second.services["code_server"]["port"]
        assert second.machine.process_running("code-server")
    finally:
        second.terminate(force=True)
    assert_gone(port)


@pytest.mark.unit
def test_debug_is_refused_before_anything_is_made_when_code_server_cannot_be_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEER_TOOLS_DIR", str(tmp_path / "tools"))
    monkeypatch.setenv("SEER_OFFLINE", "1")
    before = set((Path(os.environ["SEER_HOME"]) / "local").glob("local-*"))
    with pytest.raises(ConfigError) as info:
        Sandbox(SandboxConfig(execution_mode="cli", debug=True)).start()
    assert info.value.fields == ["debug"]
    assert "code-server" in str(info.value) and "no package index" in str(info.value)
    assert set((Path(os.environ["SEER_HOME"]) / "local").glob("local-*")) == before


@pytest.mark.unit
def test_a_prepared_install_is_checked_and_the_installer_names_what_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prepared_install`` (what ``code_server_from`` options check) takes only a complete
    install; the installer, run where it cannot build, says what is missing before any work."""
    with pytest.raises(ValueError, match="is not a folder"):
        installer.prepared_install(str(tmp_path / "absent"))
    with pytest.raises(ValueError, match="no complete install of code-server") as incomplete:
        installer.prepared_install(str(tmp_path))
    assert "scripts/code-server" in str(incomplete.value)
    complete = Path(installer.layout(str(tmp_path))["complete"])
    complete.parent.mkdir(parents=True)
    complete.write_text(installer.VERSION)
    assert installer.prepared_install(str(tmp_path)) == str(tmp_path)

    tools = tmp_path / "fresh"
    monkeypatch.setattr(installer.shutil, "which", lambda _tool: None)
    with pytest.raises(SystemExit, match=r"needs c\+\+, make, python3") as lacking:
        installer.install(str(tools))
    assert "code_server_from" in str(lacking.value)
    assert not Path(installer.layout(str(tools))["root"]).exists()  # nothing was made

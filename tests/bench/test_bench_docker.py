"""The Docker provider against doing the same work by hand with the Docker SDK.

Both sides use the same (cached) sandbox image and the same engine, so the ratio is seer's own
cost: the config and plugin machinery, the labels and ledger, the secrets file written at start,
the exec wrapper (``env``/``bash -c``, the marker variable, frame demultiplexing) and the tar
round trips. Needs the engine and base image ``scripts/docker-engine`` makes; skips without them.

* ``lifecycle``: ``Sandbox(config).start()`` + ``exec("true")`` + ``terminate()`` against
  ``containers.run`` + ``exec_run("true")`` + ``remove(force=True)``.
* ``exec ...``: one command in a started sandbox against ``container.exec_run``.
* ``file ...``: ``write_file`` + ``read_bytes`` against ``put_archive`` + ``get_archive``.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from typing import Any

import pytest
from _harness import BenchReport, compare
from seer import Sandbox, SandboxConfig

GROUP = "docker provider"
BASE_IMAGE = os.environ.get("SEER_DOCKER_TEST_IMAGE", "seer-test-base:bookworm")


def _config() -> SandboxConfig:
    return SandboxConfig(
        provider="docker",
        execution_mode="cli",
        timeout=600,
        provider_options={"image": BASE_IMAGE, "network": "host"},
    )


@pytest.fixture(scope="module")
def client() -> Any:
    pytest.importorskip("docker")
    from seer_docker.provider import DockerProvider, docker_client

    availability = DockerProvider.availability()
    if not availability.usable:
        pytest.skip(f"no Docker engine: {availability.reason} (scripts/docker-engine starts one)")
    from docker.errors import ImageNotFound

    try:
        docker_client().images.get(BASE_IMAGE)
    except ImageNotFound:
        pytest.skip(f"no base image {BASE_IMAGE} (scripts/docker-engine builds it)")
    return docker_client()


@pytest.fixture(scope="module")
def sandbox(client: Any) -> Iterator[Sandbox]:
    sb = Sandbox(_config()).start(name="bench")
    try:
        yield sb
    finally:
        sb.terminate()


@pytest.fixture(scope="module")
def raw(client: Any, sandbox: Sandbox) -> Iterator[Any]:
    """A container started by hand from the very image the sandbox runs."""
    image = client.containers.get(sandbox.sandbox_id).labels["seer.image"]
    container = client.containers.run(
        image, ["sleep", "600"], detach=True, auto_remove=True, init=True, network_mode="host"
    )
    try:
        yield container
    finally:
        container.remove(force=True)


def test_bench_docker_lifecycle(bench_report: BenchReport, client: Any, sandbox: Sandbox) -> None:
    image = client.containers.get(sandbox.sandbox_id).labels["seer.image"]

    def seer_cycle() -> int:
        sb = Sandbox(_config()).start(name="bench-cycle")
        try:
            return sb.exec("true").exit_code
        finally:
            sb.terminate()

    def by_hand() -> int:
        container = client.containers.run(
            image, ["sleep", "600"], detach=True, auto_remove=True, init=True, network_mode="host"
        )
        try:
            return int(container.exec_run(["bash", "-c", "true"]).exit_code)
        finally:
            container.remove(force=True)

    def check(code: int) -> None:
        assert code == 0

    bench_report.add(
        GROUP,
        compare(
            "lifecycle: start + exec true + terminate",
            seer=seer_cycle,
            baseline=by_hand,
            repeat=5,
            warmup=1,
            check_seer=check,
            check_baseline=check,
            note="baseline: containers.run + exec_run + remove(force=True), same image",
        ),
    )


def test_bench_docker_exec(bench_report: BenchReport, sandbox: Sandbox, raw: Any) -> None:
    def check(stdout: str) -> None:
        assert stdout == "hi\n", stdout

    bench_report.add(
        GROUP,
        compare(
            'exec "echo hi"',
            seer=lambda: sandbox.exec("echo hi").stdout,
            baseline=lambda: raw.exec_run(["bash", "-c", "echo hi"], demux=True).output[0].decode(),
            repeat=30,
            warmup=3,
            check_seer=check,
            check_baseline=check,
            note="baseline: container.exec_run(['bash', '-c', 'echo hi'], demux=True)",
        ),
    )


def test_bench_docker_file_round_trip(bench_report: BenchReport, sandbox: Sandbox, raw: Any) -> None:
    data = os.urandom(8 * 1024 * 1024)

    def seer_round_trip() -> bytes:
        sandbox.write_file("bench/data.bin", data)
        return sandbox.read_bytes("bench/data.bin")

    def by_hand() -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("data.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        raw.put_archive("/tmp", buf.getvalue())
        stream, _ = raw.get_archive("/tmp/data.bin")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.extractfile("data.bin")
            assert member is not None
            return member.read()

    def check(out: bytes) -> None:
        assert out == data

    bench_report.add(
        GROUP,
        compare(
            "file write + read (8 MiB)",
            seer=seer_round_trip,
            baseline=by_hand,
            repeat=10,
            warmup=1,
            check_seer=check,
            check_baseline=check,
            note="baseline: put_archive + get_archive of one tar",
        ),
    )

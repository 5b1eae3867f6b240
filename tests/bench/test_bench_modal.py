"""The Modal provider against doing the same work by hand with the modal SDK, on the fake.

Both sides talk to one fake Modal control plane (``seer_modal.testing.FakeModal``), whose
sandboxes are containers on the local Docker engine, first as it is and then with 50 ms added to
every call, as a real network would: on Modal, round trips are what cost, so each start's calls
are counted too. The ratio is seer's own cost: resolving the image chain from the config, the
ledger and tags, the exec wrapper (``env`` / ``bash -c``, the marker variable, stdin closed at
once) and the tar round trips. Needs the Docker engine and base image ``scripts/docker-engine``
makes; skips without them.

* ``lifecycle``: ``Sandbox(config).start()`` + ``exec("true")`` + ``terminate()`` against
  ``Sandbox.create(image=<the same image>)`` + ``exec("true").wait()`` + ``terminate()``.
* ``exec``: one command in a started sandbox against ``sandbox.exec`` + reading its output.
* ``file``: ``write_file`` + ``read_bytes`` of 1 MiB against ``sandbox.filesystem.write_bytes``
  + ``read_bytes``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from _harness import BenchReport, compare
from seer import Sandbox, SandboxConfig

GROUP = "modal provider (fake control plane)"
DELAYS = [0.0, 0.05]


@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    pytest.importorskip("modal")
    from seer_modal.testing import FakeModal

    problem = FakeModal.problem()
    if problem:
        pytest.skip(f"no fake Modal here: {problem} (scripts/docker-engine starts an engine)")
    with FakeModal() as server, server.activate():
        yield server


def _config() -> SandboxConfig:
    from seer_modal.testing import LOCAL_PIP_OPTIONS

    return SandboxConfig(
        provider="modal",
        execution_mode="cli",
        timeout=600,
        provider_options={"pip_options": LOCAL_PIP_OPTIONS},
    )


@pytest.fixture(scope="module")
def sandbox(fake: Any) -> Iterator[Sandbox]:
    sb = Sandbox(_config()).start(name="bench")  # builds the image once
    try:
        yield sb
    finally:
        sb.terminate()


@pytest.fixture(scope="module")
def raw(fake: Any, sandbox: Sandbox) -> Iterator[Any]:
    """A sandbox made by hand, from the very image seer's runs."""
    import modal

    record = fake.state.sandboxes[sandbox.sandbox_id.removeprefix("modal-")]
    app = modal.App.lookup("seer-bench-by-hand", create_if_missing=True)
    sb = modal.Sandbox.create(app=app, image=modal.Image.from_id(record.image_id), timeout=600)
    try:
        yield sb
    finally:
        sb.terminate()


@pytest.fixture(params=DELAYS, ids=lambda d: f"{int(d * 1000)}ms-per-rpc")
def delay(request: pytest.FixtureRequest, fake: Any) -> Iterator[float]:
    fake.rpc_delay = request.param
    try:
        yield request.param
    finally:
        fake.rpc_delay = 0.0


def _calls(fake: Any, fn: Any) -> int:
    start = len(fake.calls)
    fn()
    return len(fake.calls) - start


def test_bench_modal_lifecycle(
    bench_report: BenchReport, fake: Any, sandbox: Sandbox, raw: Any, delay: float
) -> None:
    import modal

    image_id = fake.state.sandboxes[sandbox.sandbox_id.removeprefix("modal-")].image_id
    app = modal.App.lookup("seer-bench-by-hand", create_if_missing=True)

    def seer_cycle() -> int:
        sb = Sandbox(_config(), progress=False).start(name="bench-cycle")
        try:
            return sb.exec("true").exit_code
        finally:
            sb.terminate()

    def by_hand() -> int:
        sb = modal.Sandbox.create(app=app, image=modal.Image.from_id(image_id), timeout=600)
        try:
            process = sb.exec("bash", "-c", "true")
            return int(process.wait())
        finally:
            sb.terminate()

    def check(code: int) -> None:
        assert code == 0

    seer_rpcs, hand_rpcs = _calls(fake, seer_cycle), _calls(fake, by_hand)
    bench_report.add(
        GROUP,
        compare(
            f"lifecycle: start + exec true + terminate, {int(delay * 1000)} ms/RPC",
            seer=seer_cycle,
            baseline=by_hand,
            repeat=4,
            warmup=0,
            check_seer=check,
            check_baseline=check,
            note=f"RPCs per cycle: seer {seer_rpcs}, by hand {hand_rpcs}; baseline: Sandbox.create("
            "image=Image.from_id(same image)) + exec + terminate",
        ),
    )


def test_bench_modal_exec(
    bench_report: BenchReport, fake: Any, sandbox: Sandbox, raw: Any, delay: float
) -> None:
    def by_hand() -> str:
        process = raw.exec("bash", "-c", "echo hi")
        out = process.stdout.read()
        process.wait()
        return str(out)

    def check(stdout: str) -> None:
        assert stdout == "hi\n", stdout

    seer_rpcs = _calls(fake, lambda: sandbox.exec("echo hi"))
    hand_rpcs = _calls(fake, by_hand)
    bench_report.add(
        GROUP,
        compare(
            f'exec "echo hi", {int(delay * 1000)} ms/RPC',
            seer=lambda: sandbox.exec("echo hi").stdout,
            baseline=by_hand,
            repeat=15,
            warmup=2,
            check_seer=check,
            check_baseline=check,
            note=f"RPCs: seer {seer_rpcs}, by hand {hand_rpcs}; baseline: sandbox.exec + stdout.read + wait",
        ),
    )


def test_bench_modal_file_round_trip(
    bench_report: BenchReport, fake: Any, sandbox: Sandbox, raw: Any, delay: float
) -> None:
    data = os.urandom(1024 * 1024)

    def seer_round_trip() -> bytes:
        sandbox.write_file("bench/data.bin", data)
        return sandbox.read_bytes("bench/data.bin")

    def by_hand() -> bytes:
        raw.filesystem.write_bytes(data, "/tmp/bench-data.bin")
        return bytes(raw.filesystem.read_bytes("/tmp/bench-data.bin"))

    def check(out: bytes) -> None:
        assert out == data

    seer_rpcs, hand_rpcs = _calls(fake, seer_round_trip), _calls(fake, by_hand)
    bench_report.add(
        GROUP,
        compare(
            f"file write + read (1 MiB), {int(delay * 1000)} ms/RPC",
            seer=seer_round_trip,
            baseline=by_hand,
            repeat=8,
            warmup=1,
            check_seer=check,
            check_baseline=check,
            note=f"RPCs: seer {seer_rpcs}, by hand {hand_rpcs}; "
            "baseline: sandbox.filesystem.write_bytes + read_bytes",
        ),
    )

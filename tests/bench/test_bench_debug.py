"""``debug=True`` (code-server in the sandbox, issue #28): what it adds to a start.

Each row times ``Sandbox(config).start()`` + ``terminate()`` with ``debug=True`` against the same
start without it (the baseline), alternating, on a warm cache: code-server is installed once, in
the warm-up (the local tools folder; the Docker image's debug layer), so the figures are what
every later start pays: writing its settings, starting it, and waiting until it answers through
the provider's port exposure. The Docker row's image copies the local tools folder's install
(``provider_options.code_server_from``) where it has one, as CI's does, rather than building
code-server in the image: the start it times is the same either way. The ssh and slurm rows copy
that install to the host's (the cluster's shared) tools folder in the warm-up, once, as their
tests do (their test hosts have no compilers), and skip without it. Skips where code-server
cannot be installed (no package index, no compiler) or, for Docker, ssh and slurm, without the
engine and base image ``scripts/docker-engine`` makes.

The RunPod and Modal rows run on their fakes (the real SDK against the control plane on
127.0.0.1, each machine a container), with the local tools folder's install as
``code_server_from`` (they skip without one, as ssh and slurm do): on RunPod the warm-up uploads
it once into the network volume's shared folder, on Modal the warm-up builds the image layer that
holds it; every timed start then finds it there. The RunPod figure includes the pod's SSH port forward to
code-server, the Modal one a tunnel.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _code_server_kit import prepared_or_skip
from _harness import BenchReport, compare
from seer import Sandbox, SandboxConfig
from test_bench_docker import BASE_IMAGE, client
from test_bench_slurm import cluster
from test_bench_ssh import fake, host, host_options

__all__ = ["client", "cluster", "fake", "host"]  # the other benchmarks' fixtures, used here too

GROUP = "debug (code-server)"


def _cycle(config: SandboxConfig) -> Any:
    def run() -> tuple[str | None, str | None]:
        sb = Sandbox(config, progress=False).start()
        try:
            return sb.code_server_url, sb.code_server_password
        finally:
            sb.terminate(force=True)

    return run


def _check_debug(out: tuple[str | None, str | None]) -> None:
    url, password = out
    assert url and "folder=" in url and password


def _check_plain(out: tuple[str | None, str | None]) -> None:
    assert out == (None, None)


def _row(bench_report: BenchReport, provider: str, config: Any, repeat: int) -> None:
    """Time start + terminate with ``config(True)`` against ``config(False)``."""
    bench_report.add(
        GROUP,
        compare(
            f"{provider}: start + terminate, debug=True vs debug=False",
            seer=_cycle(config(True)),
            baseline=_cycle(config(False)),
            repeat=repeat,
            warmup=1,
            check_seer=_check_debug,
            check_baseline=_check_plain,
            note="baseline: the same cli-mode start without debug; code-server installed in the warm-up",
        ),
    )


def test_bench_local_start_with_debug(bench_report: BenchReport) -> None:
    from seer.providers.local.provider import code_server_problem

    why = code_server_problem()
    if why:
        pytest.skip(why)

    def config(debug: bool) -> SandboxConfig:
        return SandboxConfig(execution_mode="cli", timeout=600, debug=debug)

    _row(bench_report, "local", config, repeat=5)


def test_bench_docker_start_with_debug(bench_report: BenchReport, client: Any) -> None:
    """(``client``: test_bench_docker's fixture, which skips without the engine or base image.)"""

    from seer.providers import code_server
    from seer.providers.local.provider import local_tools_dir

    options: dict[str, Any] = {"image": BASE_IMAGE, "network": "host"}
    if code_server.installed(str(local_tools_dir())):
        options["code_server_from"] = str(local_tools_dir())  # copied into the image, not built there

    def config(debug: bool) -> SandboxConfig:
        return SandboxConfig(
            provider="docker",
            execution_mode="cli",
            timeout=600,
            debug=debug,
            provider_options=options,
        )

    _row(bench_report, "docker", config, repeat=3)


def _remote_row(bench_report: BenchReport, provider: str, options: dict[str, Any]) -> None:
    """The row of a provider reached over SSH: ``debug=True`` copies the local tools folder's
    install to the host (in the warm-up, once), as its tests do; the baseline names none."""
    prepared = prepared_or_skip()

    def config(debug: bool) -> SandboxConfig:
        extra = {"code_server_from": prepared} if debug else {}
        return SandboxConfig(
            provider=provider,
            execution_mode="cli",
            timeout=600,
            debug=debug,
            provider_options={**options, **extra},
        )

    _row(bench_report, provider, config, repeat=3)


def test_bench_ssh_start_with_debug(
    bench_report: BenchReport, host: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """(``host``: test_bench_ssh's fixture, a real sshd in a container.)"""
    _remote_row(bench_report, "ssh", host_options(host, tmp_path_factory.mktemp("bench-debug-ssh")))


def test_bench_slurm_start_with_debug(bench_report: BenchReport, cluster: Any) -> None:
    """(``cluster``: test_bench_slurm's fixture, a real SLURM cluster in containers.)"""
    _remote_row(bench_report, "slurm", cluster.options())


def test_bench_runpod_start_with_debug(bench_report: BenchReport, fake: Any) -> None:
    """(``fake``: test_bench_ssh's fixture, the fake RunPod API.)"""
    prepared = prepared_or_skip()
    volume = fake.add_network_volume("seer-bench-debug")

    def config(debug: bool) -> SandboxConfig:
        options: dict[str, Any] = {"network_volume_id": volume}
        if debug:
            options["code_server_from"] = prepared  # uploaded once, in the warm-up
        return SandboxConfig(
            provider="runpod", execution_mode="cli", timeout=600, debug=debug, provider_options=options
        )

    _row(bench_report, "runpod (fake)", config, repeat=3)


@pytest.fixture(scope="module")
def fake_modal() -> Iterator[Any]:
    pytest.importorskip("modal")
    from seer_modal.testing import FakeModal

    problem = FakeModal.problem()
    if problem:
        pytest.skip(f"no fake Modal here: {problem} (scripts/docker-engine starts an engine)")
    # layers kept on the engine, as Modal keeps them: the tests' image layers are found again
    with FakeModal(keep_layers=True) as server, server.activate():
        yield server


def test_bench_modal_start_with_debug(bench_report: BenchReport, fake_modal: Any) -> None:
    from seer_modal.testing import LOCAL_PIP_OPTIONS

    prepared = prepared_or_skip()

    def config(debug: bool) -> SandboxConfig:
        options: dict[str, Any] = {"pip_options": LOCAL_PIP_OPTIONS}
        if debug:
            options["code_server_from"] = prepared  # the image's layer, built in the warm-up
        return SandboxConfig(
            provider="modal", execution_mode="cli", timeout=600, debug=debug, provider_options=options
        )

    _row(bench_report, "modal (fake)", config, repeat=3)

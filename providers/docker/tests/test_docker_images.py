"""Sandbox images: a CPU sandbox gets CPU torch, and configs share the heavy layer.

The e2e test builds real images on the test engine's base image, pointing ``find_links`` at the
machine's CPU wheel of torch (/opt/wheels, copied into the base image by scripts/docker-engine),
and lists the packages of the image it started. The images stay cached like every sandbox image.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _docker_kit import docker_config
from _progress_kit import RecordingProgress
from seer import Sandbox
from seer_docker.image import PackageSources, python_layers
from seer_docker.options import DockerOptions

CPU_WHEELS = "/opt/wheels"


@pytest.mark.unit
def test_the_heavy_stack_gets_a_layer_below_the_config_s_other_packages() -> None:
    lines = python_layers(["six", "torch==2.13.0", "jupyter_server>=2", "transformers"], PackageSources())
    assert len(lines) == 3
    heavy, service, thin = lines
    assert "torch==2.13.0 transformers" in heavy and "six" not in heavy
    assert "'jupyter_server>=2'" in service and "msgpack" in service
    assert thin.endswith("install six")
    # no CPU step unless the sandbox is CPU-only
    assert "--no-deps" not in heavy
    # without a heavy package there is no heavy layer
    assert len(python_layers(["six"], PackageSources())) == 2


@pytest.mark.unit
def test_a_cpu_sandbox_takes_torch_from_the_cpu_sources_first() -> None:
    [heavy, _] = python_layers(["torch"], PackageSources(find_links=("/w",), cpu_torch=True))
    assert "pip install --no-deps --no-index --find-links=/w torch;" in heavy
    assert "grep -i '^nvidia-'" in heavy  # a CUDA build that still came in fails the build
    [heavy, _] = python_layers(
        ["torch"], PackageSources(torch_index="http://127.0.0.1:1/cpu", cpu_torch=True)
    )
    assert "--no-deps --index-url=http://127.0.0.1:1/cpu torch;" in heavy
    assert "--no-index" not in heavy


@pytest.mark.unit
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("find_links", ["wheels"], "neither an absolute path in the image nor a URL"),
        ("torch_index", "/opt/index", "is not an index URL"),
    ],
)
def test_package_sources_are_checked(field: str, value: Any, message: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        DockerOptions.model_validate({field: value})


def _packages(sandbox: Sandbox) -> dict[str, str]:
    out = sandbox.exec(["python", "-m", "pip", "list", "--format=freeze"], check=True).stdout
    return dict(line.split("==", 1) for line in out.splitlines() if "==" in line)


def _history(client: Any, tag: str) -> list[dict[str, Any]]:
    return list(client.api.history(tag))


@pytest.mark.e2e
@pytest.mark.slow
def test_a_cpu_sandbox_gets_cpu_torch_and_a_second_config_reuses_the_heavy_layer(docker_engine: Any) -> None:
    # scripts/docker-engine copies the host's /opt/wheels into the test base image
    if not list(Path(CPU_WHEELS).glob("torch-*+cpu-*.whl")):
        pytest.skip(f"no CPU build of torch in {CPU_WHEELS} (the package index has CUDA builds only)")
    options = {"find_links": [CPU_WHEELS]}
    first = docker_config(python_packages=["torch"], provider_options=options)
    with Sandbox(first).start(quiet=True) as sandbox:
        packages = _packages(sandbox)
        tag_a = docker_engine.containers.get(sandbox.machine.id).labels["seer.image"]
    assert packages["torch"].endswith("+cpu"), packages["torch"]
    assert not [p for p in packages if p.lower().startswith("nvidia-")], sorted(packages)

    progress = RecordingProgress()
    second = docker_config(python_packages=["torch", "six"], provider_options=options)
    with Sandbox(second, progress=progress).start() as sandbox:
        packages_b = _packages(sandbox)
        tag_b = docker_engine.containers.get(sandbox.machine.id).labels["seer.image"]
    assert tag_a != tag_b
    assert "six" in packages_b and packages_b["torch"] == packages["torch"]

    # The heavy layer (the CPU torch step) is the same image layer in both: same id, same size.
    def heavy(tag: str) -> dict[str, Any]:
        [step] = [h for h in _history(docker_engine, tag) if "--no-deps --no-index" in h["CreatedBy"]]
        return step

    assert heavy(tag_a)["Id"] == heavy(tag_b)["Id"]
    assert heavy(tag_b)["Size"] > 100_000_000  # torch itself, not an empty step
    layers_a = docker_engine.images.get(tag_a).attrs["RootFS"]["Layers"]
    layers_b = docker_engine.images.get(tag_b).attrs["RootFS"]["Layers"]
    shared = 0
    for a, b in zip(layers_a, layers_b, strict=False):
        if a != b:
            break
        shared += 1
    # base, venv, heavy and runtime layers are shared; the thin layer (six) and the wheel differ
    assert shared >= 4, (layers_a, layers_b)
    assert len(layers_b) - shared <= 4
    built_b = "\n".join(progress.lines)
    if "is cached: nothing to build" not in built_b:
        # the second image was built now: its heavy step came from the build cache
        assert "Using cache" in built_b

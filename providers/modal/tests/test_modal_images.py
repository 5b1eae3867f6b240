"""A Modal sandbox without a GPU that asks for torch gets a CPU build of it (#27), as seer-docker's
do: the image installs torch's own projects from the CPU sources the options name (``find_links``,
``torch_index``) before the config's packages, and fails its build if an ``nvidia-*`` package
still came in.

The e2e test builds a real image on the fake Modal's engine, pointing ``find_links`` at the
machine's CPU wheel of torch (/opt/wheels, in the fake's base image as scripts/docker-engine
copies it), and lists the sandbox's packages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _modal_kit import PIP_OPTIONS, modal_config
from pydantic import ValidationError
from seer import Sandbox
from seer.providers.base import MachineSpec
from seer_modal.image import _python_packages, cpu_torch
from seer_modal.options import ModalOptions

CPU_WHEELS = "/opt/wheels"


class _Recipe:
    """What ``_python_packages`` asks of a ``modal.Image``: each layer, in order."""

    def __init__(self) -> None:
        self.layers: list[tuple[str, Any]] = []

    def uv_pip_install(self, *packages: str, extra_options: str = "") -> _Recipe:
        self.layers.append(("uv", (packages, extra_options)))
        return self

    def dockerfile_commands(self, commands: list[str]) -> _Recipe:
        self.layers.append(("run", commands))
        return self


def _spec(gpu: str | None, packages: list[str]) -> MachineSpec:
    return MachineSpec(name="t", timeout=60, gpu=gpu, python_packages=packages)


@pytest.mark.unit
def test_a_cpu_sandbox_takes_torch_from_the_cpu_sources_first() -> None:
    options = ModalOptions(find_links=["/w"], pip_options="--pre")
    recipe = _python_packages(_Recipe(), _spec(None, ["torch==2.13.0", "six"]), options)
    [(kind, (torch, where)), (_, (packages, extra)), (last, [check])] = recipe.layers
    assert kind == "uv" and last == "run" and torch == ("torch==2.13.0",)
    assert where == "--no-deps --no-index --find-links=/w"
    assert packages[:2] == ("torch==2.13.0", "six") and extra == "--pre --find-links=/w"
    assert "grep -i '^nvidia-'" in check and "exit 1" in check
    index = ModalOptions(torch_index="http://127.0.0.1:1/cpu")
    [(_, (_, where)), *_] = _python_packages(_Recipe(), _spec(None, ["torch"]), index).layers
    assert where == "--no-deps --index-url=http://127.0.0.1:1/cpu"


@pytest.mark.unit
def test_a_gpu_sandbox_or_no_cpu_source_installs_as_before() -> None:
    options = ModalOptions(find_links=["/w"])
    assert cpu_torch(_spec("A100", ["torch"]), options) == []
    assert cpu_torch(_spec(None, ["torch"]), ModalOptions()) == []
    assert cpu_torch(_spec(None, ["six"]), options) == []
    [(_, (packages, extra))] = _python_packages(_Recipe(), _spec("A100", ["torch"]), options).layers
    assert packages[0] == "torch" and extra == "--find-links=/w"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("find_links", ["wheels"], "neither an absolute path in the image nor a URL"),
        ("find_links", ["/w; rm -rf /"], "neither an absolute path in the image nor a URL"),
        ("torch_index", "/opt/index", "not an index URL"),
    ],
)
def test_bad_cpu_sources_are_refused_naming_them(field: str, value: Any, why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        ModalOptions.model_validate({field: value})


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.usefixtures("no_leaked_sandboxes")
def test_a_cpu_sandbox_gets_cpu_torch_and_no_nvidia_package(fake_modal: Any) -> None:
    if not list(Path(CPU_WHEELS).glob("torch-*+cpu-*.whl")):
        pytest.skip(f"no CPU build of torch in {CPU_WHEELS} (the package index has CUDA builds only)")
    # the machine's package sources, less their CPU wheel folder: torch's CPU build is reachable
    # through the option under test alone
    pip_options = PIP_OPTIONS.replace(f"--find-links {CPU_WHEELS}", "")
    assert CPU_WHEELS not in pip_options
    config = modal_config(
        python_packages=["torch"], provider_options={"find_links": [CPU_WHEELS], "pip_options": pip_options}
    )
    with Sandbox(config).start(quiet=True) as sandbox:
        code = "import importlib.metadata as m\nfor d in m.distributions(): print(d.name, d.version)"
        listing = sandbox.exec(["python", "-c", code], check=True).stdout
        [container] = [c for c in fake_modal.containers() if c.status == "running"]
        steps = [h.get("CreatedBy") or "" for h in container.image.history()]
    # the image's CPU step: torch alone, from the CPU sources only
    assert [s for s in steps if f"--no-deps --no-index --find-links={CPU_WHEELS} torch" in s], steps
    packages = dict(line.split(" ", 1) for line in listing.splitlines() if " " in line)
    assert packages["torch"].endswith("+cpu"), packages["torch"]
    assert not [p for p in packages if p.lower().startswith("nvidia-")], sorted(packages)

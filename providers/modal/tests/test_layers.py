"""How the fake renders Modal image layers as local Dockerfiles (no engine needed)."""

from __future__ import annotations

import pytest
from seer_modal.testing.layers import VENV, LayerError, layer_key, render_layer

pytestmark = pytest.mark.unit

BASE = "sha256:localbase"


def test_a_registry_base_becomes_the_local_base_with_a_python_on_path() -> None:
    # what Image.debian_slim sends with image builder 2026.10
    commands = [
        "FROM python:3.11.9-slim-bookworm",
        "RUN apt-get update",
        "RUN apt-get install -y gcc gfortran build-essential",
        "RUN pip install --upgrade pip wheel uv",
        "ENV LANG=C.UTF-8",
        'CMD ["sleep", "172800"]',
    ]
    dockerfile = render_layer(commands, {}, BASE)
    lines = dockerfile.splitlines()
    assert lines[0] == f"FROM {BASE}"
    assert f"ENV PATH={VENV}/bin:" in dockerfile
    assert "ENV LANG=C.UTF-8" in lines and 'CMD ["sleep", "172800"]' in lines
    assert "apt-get" not in dockerfile and "pip install --upgrade" not in dockerfile


def test_a_child_layer_is_built_as_written_on_its_parent() -> None:
    commands = ["FROM base", "RUN python -m pip install six", "ENV A=1"]
    assert render_layer(commands, {"base": "sha256:parent"}, BASE) == (
        "FROM sha256:parent\nRUN python -m pip install six\nENV A=1\n"
    )


def test_uv_from_its_registry_image_becomes_a_pip_install() -> None:
    commands = [
        "FROM base",
        "COPY --from=ghcr.io/astral-sh/uv:0.9.1 /uv /.uv/uv",
        "RUN /.uv/uv pip install six",
    ]
    dockerfile = render_layer(commands, {"base": "sha256:parent"}, BASE)
    assert "COPY --from" not in dockerfile
    assert "RUN /opt/modal-python/bin/python -m pip install --quiet uv && mkdir -p" in dockerfile
    assert "ln -sf /opt/modal-python/bin/uv /.uv/uv" in dockerfile
    assert dockerfile.rstrip().endswith("RUN /.uv/uv pip install six")


@pytest.mark.parametrize(
    ("commands", "message"),
    [
        (["FROM base", "COPY --from=nvidia/cuda:12 /x /x"], "cannot pull 'nvidia/cuda:12'"),
        (["FROM base", "FROM base AS two"], "multi-stage"),
        (["RUN true"], "does not start with FROM"),
    ],
)
def test_what_the_fake_cannot_build_is_refused_naming_it(commands: list[str], message: str) -> None:
    with pytest.raises(LayerError, match=message.replace("(", r"\(")):
        render_layer(commands, {"base": "sha256:parent"}, BASE)


def test_the_layer_key_follows_content() -> None:
    key = layer_key("FROM x\n", {"a.txt": b"1"}, {"V": "1"})
    assert key == layer_key("FROM x\n", {"a.txt": b"1"}, {"V": "1"})
    assert key != layer_key("FROM x\n", {"a.txt": b"2"}, {"V": "1"})
    assert key != layer_key("FROM x\n", {"a.txt": b"1"}, {"V": "2"})
    assert key != layer_key("FROM y\n", {"a.txt": b"1"}, {"V": "1"})

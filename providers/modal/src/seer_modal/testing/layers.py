"""Modal image layers as local Dockerfiles: what the fake builds for each ``ImageGetOrCreate``.

A Modal image is a chain of layers; each layer's definition (``api_pb2.Image``) is a list of
Dockerfile commands whose ``FROM`` names either a parent layer (``FROM base``) or a registry
image (``FROM python:3.11-slim-bookworm`` for ``Image.debian_slim``). No image can be pulled
here, so:

* a layer whose ``FROM`` names a registry image becomes the **local base image** (a Debian image
  with ``python3``) plus a Python virtual environment first on ``PATH``, so ``python`` and
  ``python -m pip`` work as in Modal's ``python:*-slim`` images. That layer's own ``RUN``,
  ``COPY`` and ``ADD`` lines (compilers, pip upgrades, the standalone Python of
  ``from_registry(add_python=...)``) are skipped: they set up the registry image, which the
  local base replaces. Its ``ENV``, ``WORKDIR``, ``CMD`` and similar lines are kept.
* ``COPY --from=ghcr.io/astral-sh/uv:<version> /uv <dest>`` (``Image.uv_pip_install``) becomes
  a ``pip install uv`` into the fake's Python environment, ``<dest>`` linked to it; any other
  ``COPY --from`` an image fails the build, naming the image.
* every other line is built as written, on the parent layer's Docker image.

The Python is the local base image's whatever ``python_version`` the definition asks for.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence

__all__ = ["RECIPE", "VENV", "LayerError", "layer_key", "render_layer"]

#: Bump when the shape of the rendered Dockerfiles changes, so cached layers are rebuilt.
RECIPE = "1"
#: The virtual environment that stands in for the registry image's Python.
VENV = "/opt/modal-python"
#: Instructions of a registry-base layer that survive the mapping onto the local base.
_KEPT_IN_BASE = {"ENV", "WORKDIR", "CMD", "ENTRYPOINT", "LABEL", "ARG", "EXPOSE", "SHELL", "USER"}
_UV_COPY = re.compile(r"^COPY\s+--from=ghcr\.io/astral-sh/uv(?::\S+)?\s+/uv\s+(\S+)\s*$", re.IGNORECASE)
_COPY_FROM = re.compile(r"^COPY\s+--from=(\S+)", re.IGNORECASE)


class LayerError(ValueError):
    """A layer definition the fake cannot build; the message says which line and why."""


#: Make the virtual environment. Debian keeps pip's wheel in /usr/share/python-wheels: unpacking
#: it into the environment takes a second where ``python3 -m venv`` (ensurepip) takes ten.
_MAKE_VENV = (
    f"RUN if ls /usr/share/python-wheels/pip-*.whl >/dev/null 2>&1; then "
    f"python3 -m venv --without-pip {VENV} "
    f"&& site=$({VENV}/bin/python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])') "
    f'&& python3 -m zipfile -e "$(ls /usr/share/python-wheels/pip-*.whl | head -n 1)" "$site" '
    f"&& printf '#!{VENV}/bin/python\\nimport sys\\n"
    "from pip._internal.cli.main import main\\nsys.exit(main())\\n' "
    f"> {VENV}/bin/pip && chmod 755 {VENV}/bin/pip; "
    f"else python3 -m venv {VENV}; fi"
)


def _base_recipe(local_base: str) -> list[str]:
    return [
        f"FROM {local_base}",
        _MAKE_VENV,
        f"ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
        "PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore",
    ]


def render_layer(commands: list[str], parents: Mapping[str, str], local_base: str) -> str:
    """The Dockerfile that builds one layer.

    ``commands``: the layer's ``dockerfile_commands``; ``parents``: each ``FROM`` name of a parent
    layer (``base_images[].docker_tag``) to its Docker image id; ``local_base``: the image that
    stands in for every registry image.
    """
    if not commands or not commands[0].upper().startswith("FROM "):
        raise LayerError(f"the layer does not start with FROM: {commands[:1]!r}")
    ref = commands[0].split()[1]
    if ref in parents:
        lines = [f"FROM {parents[ref]}"]
        from_registry = False
    else:
        lines = _base_recipe(local_base)
        from_registry = True
    for command in commands[1:]:
        word = command.split(None, 1)[0].upper() if command.strip() else ""
        if word == "FROM":
            raise LayerError(f"multi-stage layers are not supported by the fake: {command!r}")
        if from_registry and word not in _KEPT_IN_BASE:
            continue
        uv = _UV_COPY.match(command)
        if uv:
            dest = shlex.quote(uv.group(1))
            # Modal copies a static binary, whatever Python is first on PATH (a venv without pip,
            # say): install it with the fake's own Python, the one the registry image stands for.
            lines.append(
                f'RUN {VENV}/bin/python -m pip install --quiet uv && mkdir -p "$(dirname {dest})" '
                f"&& ln -sf {VENV}/bin/uv {dest}"
            )
            continue
        other = _COPY_FROM.match(command)
        if other:
            raise LayerError(f"the fake cannot pull {other.group(1)!r} (in {command!r})")
        lines.append(command)
    return "\n".join(lines) + "\n"


def layer_key(
    dockerfile: str,
    context_files: Mapping[str, bytes],
    build_args: Mapping[str, str],
    mount: Sequence[tuple[str, str, int]] = (),
) -> str:
    """A layer's content hash: the same definition on the same parents gives the same key.
    ``mount``: the files of its context mount (path, sha256, mode), where it has one."""
    files = sorted((name, hashlib.sha256(data).hexdigest()) for name, data in context_files.items())
    parts: list[object] = [RECIPE, dockerfile, files, sorted(build_args.items())]
    if mount:
        parts.append(sorted(mount))
    payload = json.dumps(parts)
    return hashlib.sha256(payload.encode()).hexdigest()

"""``SandboxConfig.provider_options`` for the Docker provider."""

from __future__ import annotations

import os
import posixpath
import re
import sys
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_IMAGE", "DockerOptions"]

#: The base image when none is given: the slim Python image of the client's own minor version.
DEFAULT_IMAGE = f"python:{sys.version_info.major}.{sys.version_info.minor}-slim"

_VOLUME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_URL = re.compile(r"^(https?|file)://\S+$")
_SIZE = re.compile(r"^[0-9]+[bkmgBKMG]?$")


class DockerOptions(BaseModel):
    """How a sandbox runs on Docker. Every field is optional.

    The engine is the one the Docker SDK finds: ``DOCKER_HOST`` (and ``DOCKER_TLS_VERIFY`` /
    ``DOCKER_CERT_PATH``) or the local socket.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = Field(
        DEFAULT_IMAGE,
        description="base image seer builds the sandbox image on (needs python3 >= 3.11 and bash)",
    )
    pull: bool = Field(True, description="pull the base image when the engine does not have it")
    network: Literal["host"] = Field(
        "host",
        description="the container's network; 'host': services seer starts listen on the host's 127.0.0.1",
    )
    model_cache: str = Field(
        "volume",
        description="'volume' (a named volume shared by all sandboxes on the host) or an absolute "
        "host path to bind-mount as the Hugging Face hub cache",
    )
    model_volume: str = Field("seer-models", description="name of the model-cache volume")
    workdir: str = Field("/workspace", description="the sandbox's working directory in the container")
    shm_size: str | None = Field("1g", description="size of /dev/shm (e.g. '2g'); None: Docker's default")

    find_links: list[str] = Field(
        default_factory=list,
        description="wheel folders (paths inside the image) or URLs every pip install in the image "
        "build consults (pip's --find-links): e.g. a folder holding a CPU build of torch",
    )
    torch_index: str | None = Field(
        None,
        description="an index URL offering CPU builds of torch (PyTorch's CPU wheel index or a "
        "mirror); a gpu=None sandbox takes torch from it, or else from find_links",
    )

    code_server_from: str | None = Field(
        None,
        description="a tools folder on the client holding a complete code-server install of the "
        "version seer uses (as scripts/code-server makes it), built for the image's platform: "
        "debug=True copies it into the image instead of building code-server there (no compilers, "
        "no npm registry needed)",
    )

    @field_validator("code_server_from")
    @classmethod
    def _check_code_server_from(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from seer.providers import code_server

        path = os.path.abspath(os.path.expanduser(value))
        if not os.path.isdir(path):
            raise ValueError(f"{value!r} is not a folder on this machine")
        if not code_server.installed(path):
            raise ValueError(
                f"{path} holds no complete install of code-server {code_server.VERSION} "
                f"(expected {code_server.layout(path)['complete']}; make one with scripts/code-server "
                f"or python -m seer.providers.code_server {path})"
            )
        return path

    @field_validator("find_links")
    @classmethod
    def _check_find_links(cls, value: list[str]) -> list[str]:
        for link in value:
            if not (posixpath.isabs(link) or _URL.match(link)):
                raise ValueError(f"{link!r} is neither an absolute path in the image nor a URL")
        return value

    @field_validator("torch_index")
    @classmethod
    def _check_torch_index(cls, value: str | None) -> str | None:
        if value is not None and not _URL.match(value):
            raise ValueError(f"{value!r} is not an index URL (http://, https:// or file://)")
        return value

    @field_validator("image")
    @classmethod
    def _check_image(cls, value: str) -> str:
        value = value.strip()
        if not value or any(c.isspace() for c in value):
            raise ValueError(f"{value!r} is not an image reference (e.g. 'python:3.11-slim')")
        return value

    @field_validator("model_cache")
    @classmethod
    def _check_model_cache(cls, value: str) -> str:
        if value != "volume" and not posixpath.isabs(value):
            raise ValueError(f"expected 'volume' or an absolute host path, got {value!r}")
        return value

    @field_validator("model_volume")
    @classmethod
    def _check_volume(cls, value: str) -> str:
        if not _VOLUME_NAME.match(value):
            raise ValueError(f"{value!r} is not a Docker volume name (letters, digits, _ . -)")
        return value

    @field_validator("workdir")
    @classmethod
    def _check_workdir(cls, value: str) -> str:
        if not posixpath.isabs(value) or posixpath.normpath(value) == "/":
            raise ValueError(f"workdir must be an absolute path other than '/', got {value!r}")
        return posixpath.normpath(value)

    @field_validator("shm_size")
    @classmethod
    def _check_shm(cls, value: str | None) -> str | None:
        if value is not None and not _SIZE.match(value):
            raise ValueError(f"{value!r} is not a size (e.g. '512m', '2g')")
        return value

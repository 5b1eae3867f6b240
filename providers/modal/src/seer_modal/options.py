"""``SandboxConfig.provider_options`` for the Modal provider."""

from __future__ import annotations

import os
import posixpath
import re
import sys

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_APP", "ModalOptions"]

#: The Modal app seer's sandboxes belong to when none is named (``SEER_MODAL_APP`` overrides it):
#: ``seer ls`` lists the sandboxes of this app, from any machine with the same credentials.
DEFAULT_APP = "seer"
#: Modal's names (apps, volumes): letters, digits, ``-``, ``_``, ``.``; under 64 characters.
_MODAL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_PYTHON = re.compile(r"^3\.(1[1-9]|[2-9][0-9])$")


def default_app() -> str:
    """The app name when the config names none: ``$SEER_MODAL_APP``, else ``seer``."""
    return os.environ.get("SEER_MODAL_APP") or DEFAULT_APP


class ModalOptions(BaseModel):
    """How a sandbox runs on Modal. Every field is optional.

    Credentials are the modal SDK's own (``modal token new`` writes ``~/.modal.toml``, or
    ``MODAL_TOKEN_ID`` / ``MODAL_TOKEN_SECRET``); nothing about them goes in a config.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    app_name: str = Field(
        default_factory=default_app,
        description="the Modal app the sandbox belongs to (default $SEER_MODAL_APP or 'seer'); "
        "`seer ls` lists this app's sandboxes",
    )
    image: str | None = Field(
        None,
        description="a registry image to build on (needs python3 >= 3.11 and bash); None: Modal's "
        "debian_slim with the client's Python minor version",
    )
    python_version: str = Field(
        f"{sys.version_info.major}.{sys.version_info.minor}",
        description="Python of the debian_slim base image (default: the client's minor version)",
    )
    model_volume: str = Field(
        "seer-models", description="the Modal Volume holding the Hugging Face hub cache, shared by sandboxes"
    )
    workdir: str = Field("/workspace", description="the sandbox's working directory")
    pip_options: str = Field(
        "",
        description="extra options for `uv pip install` of python_packages (an index: "
        "'--index-url URL', '--extra-index-url URL', '--find-links PATH')",
    )
    cpu: float | None = Field(None, gt=0, description="CPU cores to reserve (Modal's default if None)")
    memory: int | None = Field(None, gt=0, description="memory to reserve, in MiB (Modal's default if None)")
    region: str | None = Field(None, description="Modal region(s) to run in, e.g. 'us-east'")
    cloud: str | None = Field(None, description="Modal cloud provider, e.g. 'aws', 'gcp', 'oci'")
    tunnel_ports: int = Field(
        6,
        ge=1,
        le=20,
        description="how many encrypted tunnels the sandbox gets: ports served to the client at once "
        "(Jupyter, one per served interface)",
    )

    @field_validator("app_name", "model_volume")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _MODAL_NAME.match(value):
            raise ValueError(f"{value!r} is not a Modal name (letters, digits, - _ .; under 64 characters)")
        return value

    @field_validator("python_version")
    @classmethod
    def _check_python(cls, value: str) -> str:
        if not _PYTHON.match(value):
            raise ValueError(f"expected a Python minor version of 3.11 or later, like '3.12'; got {value!r}")
        return value

    @field_validator("image")
    @classmethod
    def _check_image(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or any(c.isspace() for c in value)):
            raise ValueError(f"{value!r} is not an image reference (e.g. 'python:3.11-slim')")
        return value

    @field_validator("workdir")
    @classmethod
    def _check_workdir(cls, value: str) -> str:
        if not posixpath.isabs(value) or posixpath.normpath(value) == "/":
            raise ValueError(f"workdir must be an absolute path other than '/', got {value!r}")
        return posixpath.normpath(value)

"""``SandboxConfig.provider_options`` for the Modal provider."""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import sys

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_APP", "ModalOptions"]

#: The Modal app seer's sandboxes belong to when none is named (``SEER_MODAL_APP`` overrides it):
#: ``seer ls`` lists the sandboxes of this app, from any machine with the same credentials.
DEFAULT_APP = "seer"
#: Modal's names (apps, volumes): letters, digits, ``-``, ``_``, ``.``; under 64 characters.
_MODAL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_PYTHON = re.compile(r"^3\.(1[1-9]|[2-9][0-9])$")
#: What a word of ``pip_options`` may hold: an option (``--find-links``, ``--pre``,
#: ``--index-url=URL``) or an option's value (a URL, a path). No shell character: the SDK writes
#: the options into a ``RUN`` line of the image as they are.
_PIP_WORD = re.compile(r"^[A-Za-z0-9._~:/@%+=,-]+$")
#: What ``torch_index`` and a ``find_links`` URL look like.
_URL = re.compile(r"^(https?|file)://\S+$")


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
    find_links: list[str] = Field(
        default_factory=list,
        description="wheel folders (absolute paths inside the image) or URLs every `uv pip install` "
        "of the image consults (--find-links): e.g. a folder holding a CPU build of torch, which a "
        "gpu=None sandbox then takes",
    )
    torch_index: str | None = Field(
        None,
        description="an index URL offering CPU builds of torch (PyTorch's CPU wheel index or a "
        "mirror); a gpu=None sandbox takes torch from it, or else from find_links",
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

    code_server_from: str | None = Field(
        None,
        description="a tools folder on the client holding a complete code-server install of the "
        "version seer uses (as scripts/code-server makes it), built for the image's platform: "
        "debug=True copies it into an image layer (its files uploaded once) instead of building "
        "code-server in the image",
    )

    @field_validator("code_server_from")
    @classmethod
    def _check_code_server_from(cls, value: str | None) -> str | None:
        from seer.providers import code_server

        return None if value is None else code_server.prepared_install(value)

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

    @field_validator("pip_options")
    @classmethod
    def _check_pip_options(cls, value: str) -> str:
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a list of options: {exc}") from None
        after_option = False
        for word in words:
            bad = sorted({c for c in word if not _PIP_WORD.match(c)})
            if bad:
                raise ValueError(
                    f"{word!r} holds {''.join(bad)!r}: pip_options are uv pip options and their "
                    "values (URLs, paths) only, as they reach the image's RUN line; packages go in "
                    "python_packages"
                )
            if not word.startswith("-") and not after_option:
                raise ValueError(
                    f"{word!r} is not an option (options start with '-'); packages go in python_packages"
                )
            after_option = word.startswith("-") and "=" not in word
        return shlex.join(words)

    @field_validator("find_links")
    @classmethod
    def _check_find_links(cls, value: list[str]) -> list[str]:
        for link in value:
            if not (posixpath.isabs(link) or _URL.match(link)) or not _PIP_WORD.match(link):
                raise ValueError(
                    f"{link!r} is neither an absolute path in the image nor a URL (no spaces or "
                    "shell characters: it reaches the image's RUN line)"
                )
        return value

    @field_validator("torch_index")
    @classmethod
    def _check_torch_index(cls, value: str | None) -> str | None:
        if value is not None and not (_URL.match(value) and _PIP_WORD.match(value)):
            raise ValueError(f"{value!r} is not an index URL (http://, https:// or file://)")
        return value

    @field_validator("workdir")
    @classmethod
    def _check_workdir(cls, value: str) -> str:
        if not posixpath.isabs(value) or posixpath.normpath(value) == "/":
            raise ValueError(f"workdir must be an absolute path other than '/', got {value!r}")
        return posixpath.normpath(value)

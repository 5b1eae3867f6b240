"""``SandboxConfig.provider_options`` for the RunPod provider."""

from __future__ import annotations

import posixpath
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from seer_ssh.options import check_interpreter

__all__ = ["DEFAULT_IMAGE", "RunPodOptions"]

#: RunPod's PyTorch image: Python 3.11, CUDA, sshd started from PUBLIC_KEY.
DEFAULT_IMAGE = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"
_ID = re.compile(r"^[A-Za-z0-9_-]+$")
#: What a mount path may hold: it goes into RunPod's GraphQL as the runpod SDK writes it (unescaped),
#: and into the pod's shell lines.
_MOUNT = re.compile(r"^/[A-Za-z0-9._/-]+$")
#: seer's folder on the container's disk: a sandbox's own files (its secrets, its work) when the
#: pod mounts a network volume, which outlives the pod and is shared with other pods.
CONTAINER_DIR = "/root/.seer"


class RunPodOptions(BaseModel):
    """How a sandbox's pod is made. Every field is optional.

    The API key is never an option: it comes from ``RUNPOD_API_KEY`` or runpod's own config
    (``~/.runpod/config.toml``, written by ``runpod config``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = Field(DEFAULT_IMAGE, description="the pod's image (needs sshd, bash and python3 >= 3.11)")
    cloud_type: Literal["ALL", "SECURE", "COMMUNITY"] = Field(
        "ALL", description="RunPod's cloud to rent from"
    )
    container_disk_gb: int = Field(20, ge=1, description="the container's disk (lost when the pod ends)")
    volume_gb: int = Field(
        20,
        ge=0,
        description="the pod's own volume, at volume_mount_path (0: none; ignored with a network volume)",
    )
    volume_mount_path: str = Field("/workspace", description="where the pod's (or network) volume is mounted")
    network_volume_id: str | None = Field(
        None,
        description="a network volume of your account: the model cache and environments live there, "
        "shared by every pod that mounts it (a model downloads once); a sandbox's own files never "
        "do; refused with hidden models (the shared cache would name them)",
    )
    cpu_instance_id: str | None = Field(
        None, description="the CPU instance for gpu=None pods (RunPod's default)"
    )
    python: str = Field("python3", description="the pod's Python (>= 3.11) environments are made from")
    startup_timeout: float = Field(900, gt=0, description="seconds to wait for the pod's SSH to answer")
    code_server_from: str | None = Field(
        None,
        description="a tools folder on the client holding a complete code-server install of the "
        "version seer uses (as scripts/code-server makes it), built for the pod's platform: "
        "debug=True uploads it once into the pod's shared folder (on the volume) instead of "
        "building code-server in the pod (which needs compilers in the image)",
    )

    @field_validator("image")
    @classmethod
    def _check_image(cls, value: str) -> str:
        if not value.strip() or any(c.isspace() or c in '"\\' or not c.isprintable() for c in value):
            raise ValueError(f"{value!r} is not an image reference")
        return value

    @field_validator("volume_mount_path")
    @classmethod
    def _check_mount(cls, value: str) -> str:
        if not _MOUNT.match(value) or posixpath.normpath(value) == "/" or ".." in value.split("/"):
            raise ValueError(
                f"expected an absolute path other than '/' of letters, digits and . _ - / only, got {value!r}"
            )
        return posixpath.normpath(value)

    @field_validator("network_volume_id", "cpu_instance_id")
    @classmethod
    def _check_id(cls, value: str | None) -> str | None:
        if value is not None and not _ID.match(value):
            raise ValueError(f"{value!r} is not a RunPod id")
        return value

    @field_validator("python")
    @classmethod
    def _check_python(cls, value: str) -> str:
        return check_interpreter(value)

    @field_validator("code_server_from")
    @classmethod
    def _check_code_server_from(cls, value: str | None) -> str | None:
        from seer.providers import code_server

        return None if value is None else code_server.prepared_install(value)

    def tools_dir(self) -> str:
        """Where code-server is installed for ``debug=True``: beside the shared caches (on the
        volume when there is one), so the pods on a network volume install or upload it once."""
        return posixpath.join(self.shared_dir(), "tools")

    def base_dir(self) -> str:
        """seer's folder in the pod, where sandboxes live: on the pod's own volume when it has
        one (it goes with the pod), else on the container's disk. Never on a network volume: that
        outlives the pod and other pods mount it, so a sandbox's secrets and work stay off it."""
        if self.volume_gb and not self.network_volume_id:
            return posixpath.join(self.volume_mount_path, ".seer")
        return CONTAINER_DIR

    def shared_dir(self) -> str:
        """Where the caches every sandbox of the pod shares live (the model cache, environments,
        seer's runtime): on the volume when there is one, so a network volume's outlive the pod."""
        if self.network_volume_id or self.volume_gb:
            return posixpath.join(self.volume_mount_path, ".seer")
        return CONTAINER_DIR

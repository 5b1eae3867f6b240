"""``SandboxConfig.provider_options`` for the local provider."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["LocalOptions", "python_choice"]


class LocalOptions(BaseModel):
    """``SandboxConfig.provider_options`` for the local provider. Every field is optional."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    python: str = Field(
        "auto",
        description="'auto': the sandbox runs on the Python seer runs on when it has every package the "
        "config needs, else on an environment seer builds for what it lacks (refused where no package "
        "index can be reached: $SEER_OFFLINE, $PIP_NO_INDEX); 'system': always this Python as it is, "
        "refusing what it lacks, and nothing is ever installed; an absolute path: that interpreter as "
        "it is (it needs seer-core at this version too), refusing what it lacks",
    )

    @field_validator("python")
    @classmethod
    def _known_or_an_interpreter(cls, value: str) -> str:
        if value in ("auto", "system"):
            return value
        if not os.path.isabs(value):
            raise ValueError(f"'auto', 'system' or the absolute path of a Python interpreter, not {value!r}")
        if not (os.path.isfile(value) and os.access(value, os.X_OK)):
            raise ValueError(f"{value!r} is not an executable file")
        return value


def python_choice(options: Any) -> str:
    """``provider_options.python`` of a parsed ``MachineSpec.options`` (``"auto"`` without one)."""
    return options.python if isinstance(options, LocalOptions) else "auto"

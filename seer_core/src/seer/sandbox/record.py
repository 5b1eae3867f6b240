"""``SandboxRecord``: what the client keeps of a sandbox, and what a ``Sandbox`` is rebuilt from.

A started sandbox's record is a JSON file in ``$SEER_HOME/sandboxes/<id>.json`` (private to the
user: it holds tokens), written by :meth:`seer.Sandbox.start` and brought up to date by
``set_service`` / ``add_env``. ``Sandbox(record=..., machine=...)`` rebuilds a sandbox from one:
:meth:`~seer.Sandbox.attach` (the record read back, the machine found again) and
:meth:`~seer.Sandbox.from_snapshot` (a new record naming the snapshot; ``start()`` makes the machine).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from seer.config import SandboxConfig
from seer.providers.base import Snapshot
from seer.sandbox.bootstrap import RepoHandle

__all__ = ["SandboxRecord"]


@dataclass
class SandboxRecord:
    """A sandbox's state as the client keeps it (see the module's docstring)."""

    provider: str
    config: SandboxConfig
    name: str | None = None
    created_at: float | None = None
    repos: list[RepoHandle] = field(default_factory=list)
    #: What steps, modes and plugins recorded (``Sandbox.set_service``).
    services: dict[str, Any] = field(default_factory=dict)
    #: Variables core sets for everything run in the sandbox (``Sandbox.add_env``).
    env: dict[str, str] = field(default_factory=dict)
    outputs_dir: Path | None = None
    #: The snapshot the sandbox starts (or started) from.
    snapshot: Snapshot | None = None

    def to_json(self, sandbox_id: str) -> dict[str, Any]:
        """The record file's contents for the sandbox ``sandbox_id``."""
        created = self.created_at or 0.0
        data: dict[str, Any] = {
            "id": sandbox_id,
            "provider": self.provider,
            "name": self.name,
            "created_at": created,
            # no sandbox outlives this: its record expires from here at the latest
            "expires_at": created + self.config.timeout,
            "config": self.config.model_dump(
                mode="json", exclude={"name"} & set(type(self.config).model_fields)
            ),
            "repos": [asdict(r) for r in self.repos],
            "services": self.services,
            "env": self.env,
            "outputs_dir": str(self.outputs_dir) if self.outputs_dir else None,
        }
        if self.snapshot is not None:
            data["snapshot"] = self.snapshot.to_dict()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SandboxRecord:
        """The record a :meth:`to_json` dict (or an ended sandbox's shorter record) describes."""
        provider = str(data["provider"])
        config = (
            SandboxConfig.model_validate(data["config"])
            if "config" in data
            else SandboxConfig(provider=provider)  # an ended sandbox's record
        )
        return cls(
            provider=provider,
            config=config,
            name=data.get("name"),
            created_at=data.get("created_at"),
            repos=[RepoHandle(**r) for r in data.get("repos", [])],
            services=dict(data.get("services", {})),
            env=dict(data.get("env", {})),
            outputs_dir=Path(data["outputs_dir"]) if data.get("outputs_dir") else None,
            snapshot=Snapshot.from_dict(data["snapshot"]) if data.get("snapshot") else None,
        )

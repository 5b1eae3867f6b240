"""The embedded ``local`` provider: a sandbox is a working directory plus processes on this machine.

* :mod:`seer.providers.local.provider`: :class:`~seer.providers.local.provider.LocalProvider`
  and its machine, the sandbox folders under ``$SEER_HOME/local/<id>/``;
* :mod:`seer.providers.local.env`: each sandbox's thin venv over cached package layers (the local
  analogue of an image);
* :mod:`seer.providers.local.supervisor`: the detached process that owns a sandbox's lifetime;
* :mod:`seer.providers.local.sandbox_dir`: a sandbox's folder and record, all the supervisor imports.

Registered by :mod:`seer.builtin` exactly like a third-party provider. "local" here is the
provider; the ``local`` *execution mode* (the agent working in a folder on this machine) is
:mod:`seer.sessions.workdir`.

``LocalProvider`` is imported on first use: ``python -m seer.providers.local.supervisor`` imports
this package first, and the supervisor must not pay for the provider's imports (pydantic, pluggy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seer.providers.local.provider import LocalProvider

__all__ = ["LocalProvider"]


def __getattr__(name: str) -> Any:
    if name == "LocalProvider":
        from seer.providers.local.provider import LocalProvider

        return LocalProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

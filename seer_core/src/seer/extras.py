"""The optional packages the client side imports, and the extra of seer that brings each.

seer-core's own dependencies are what every use needs; a package only some uses need comes with
an extra (``seer[notebook]``, ``seer[models]``, ...). Client code imports such a package through
:func:`require`, so that a bare ``seer-core`` says which extra to install rather than raising
``ModuleNotFoundError: No module named 'websocket'``. ``tests/test_versions.py`` checks that every
extra that runs sandboxes or serves agents (docker, ssh, runpod, modal, mcp) brings each package
listed here, so each of them works alone.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from seer.errors import MissingExtraError

__all__ = ["CLIENT_PACKAGES", "ClientPackage", "require"]


@dataclass(frozen=True)
class ClientPackage:
    """An optional package the client side imports: its distribution and the extra that has it."""

    distribution: str
    extra: str


#: Import name -> the distribution and the seer-core extra that provides it. Every extra of
#: ``seer-core`` listed here also has it (``notebook`` includes ``notebook-client``).
CLIENT_PACKAGES: dict[str, ClientPackage] = {
    # seer.notebook: a notebook session talks to the sandbox's Jupyter server over a websocket.
    "websocket": ClientPackage("websocket-client", "notebook"),
    # seer.notebook.live: the notebook's live document, replicated (Jupyter's collaborative model).
    "pycrdt": ClientPackage("pycrdt", "notebook"),
    "jupyter_ydoc": ClientPackage("jupyter-ydoc", "notebook"),
}


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` (a key of :data:`CLIENT_PACKAGES`); when it is missing, raise
    :class:`~seer.errors.MissingExtraError` saying that ``purpose`` (``"a notebook session"``)
    needs it and which extra to install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module and not (exc.name and module.startswith(exc.name + ".")):
            raise  # the package is there, but something it imports is not
        package = CLIENT_PACKAGES[module]
        raise MissingExtraError(package.distribution, package.extra, purpose, module=module) from None

"""Sandbox ids: checked against their provider's exact format wherever they enter.

A sandbox id arrives from a shell (``seer down ID``), from Python (``Sandbox.attach(id)``), from
an agent (an MCP tool's ``sandbox_id``) and from files on disk (records, ledgers, folder names).
Providers build paths, container filters and process lookups from it, so an id such as
``../../../x/evil`` must never reach them: it could name a folder outside seer's home whose
planted files point at processes to kill and folders to delete. Every entry point calls
:func:`check_sandbox_id` (one provider) or :func:`providers_for_id` (any of the given ones; the
installed ones are :func:`seer.preflight.sandbox_id_providers`) before anything else looks at the id.
Nothing here asks the plugin registry: the caller hands over the provider classes it holds.

Each provider declares its ids' form as :attr:`seer.providers.base.Provider.id_pattern`; on top
of it every id must pass :data:`SAFE_ID` (letters, digits, ``-`` and ``_``, at most 128
characters), so a provider whose own pattern is loose still never gets a path separator or a dot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from seer.errors import ConfigProblem, InvalidSandboxIdError

if TYPE_CHECKING:
    from seer.providers.base import Provider

__all__ = ["SAFE_ID", "check_sandbox_id", "providers_for_id"]

#: What every sandbox id must look like, whatever its provider: never a path, never an option.
SAFE_ID = r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}"
_SAFE = re.compile(SAFE_ID)


def _matches(sandbox_id: object, provider_cls: type[Provider]) -> bool:
    return (
        isinstance(sandbox_id, str)
        and _SAFE.fullmatch(sandbox_id) is not None
        and re.fullmatch(provider_cls.id_pattern, sandbox_id) is not None
    )


def _invalid(sandbox_id: object, forms: dict[str, str], argument: str) -> InvalidSandboxIdError:
    expected = "; ".join(f"{name}: {pattern}" for name, pattern in forms.items()) or "no provider installed"
    return InvalidSandboxIdError(
        [
            ConfigProblem(
                argument,
                f"{sandbox_id!r} is not a valid sandbox id (ids are what `seer up` and `seer ls` "
                f"print; their exact forms: {expected})",
            )
        ],
        title="Invalid sandbox id",
    )


def check_sandbox_id(sandbox_id: object, provider: type[Provider], *, argument: str = "sandbox_id") -> str:
    """``sandbox_id``, if it has the exact form of ``provider``'s ids (the provider's class).

    Raises :class:`~seer.errors.InvalidSandboxIdError` (a ``ConfigError`` and a
    ``SandboxNotFoundError``) naming ``argument`` otherwise.
    """
    if not _matches(sandbox_id, provider):
        raise _invalid(sandbox_id, {provider.name: provider.id_pattern}, argument)
    return str(sandbox_id)


def providers_for_id(
    sandbox_id: object, providers: Mapping[str, type[Provider]], *, argument: str = "sandbox_id"
) -> list[str]:
    """The names of ``providers`` (name -> class) whose id format ``sandbox_id`` has.

    Raises :class:`~seer.errors.InvalidSandboxIdError` naming ``argument`` when there is none.
    """
    matching = [name for name, cls in providers.items() if _matches(sandbox_id, cls)]
    if not matching:
        raise _invalid(sandbox_id, {name: cls.id_pattern for name, cls in providers.items()}, argument)
    return matching

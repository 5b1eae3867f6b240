"""seer-core's own plugin: the hook implementations that register what core ships, exactly as a
third-party plugin registers its own (``seer.plugins`` loads this module like an entry point).

* the ``local`` provider (:mod:`seer.providers.local`);
* the ``notebook``, ``cli`` and ``local`` execution modes (:mod:`seer.notebook.server`,
  :mod:`seer.sessions.shell`, :mod:`seer.sessions.workdir`);
* the ``library``, ``prompt`` and ``skill`` expose modes (:mod:`seer.expose.modes`);
* the notebook mode's early start, when a sandbox has been provisioned.

Nothing else lives here: each implementation is in the module of its concept. Every import is
done inside the hook, so loading the plugin manager imports none of them. Two plugins, named as
:data:`seer.plugins.BUILTIN_PLUGINS` lists them: ``local`` (the provider) and ``builtin-modes``
(everything else), so ``SEER_DISABLE_PLUGINS=local`` leaves the modes in place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seer.hookspecs import hookimpl

if TYPE_CHECKING:
    from seer.sandbox import Sandbox


class LocalProviderPlugin:
    """The ``local`` built-in plugin: the local provider."""

    @staticmethod
    @hookimpl
    def seer_register_providers(register: Any) -> None:
        from seer.providers.local.provider import LocalProvider

        register(LocalProvider)


class BuiltinModes:
    """The ``builtin-modes`` built-in plugin: core's execution and expose modes."""

    @staticmethod
    @hookimpl
    def seer_register_execution_modes(register: Any) -> None:
        from seer.notebook.server import NotebookMode
        from seer.sessions.shell import CliMode
        from seer.sessions.workdir import LocalMode

        for mode in (NotebookMode, CliMode, LocalMode):
            register(mode)

    @staticmethod
    @hookimpl
    def seer_register_expose_modes(register: Any) -> None:
        from seer.expose.modes import BUILTIN_EXPOSE_MODES

        for mode in BUILTIN_EXPOSE_MODES:
            register(mode)

    @staticmethod
    @hookimpl
    def seer_sandbox_provisioned(sandbox: Sandbox) -> None:
        from seer.notebook.server import start_early

        start_early(sandbox)

"""The hooks a seer plugin may implement.

A plugin is a module (or object) with functions marked ``@seer.hookimpl`` and named after these
specs, published under the ``seer`` entry-point group::

    [project.entry-points.seer]
    my_provider = "my_package.plugin"

Registration hooks receive a ``register`` callable and hand it *classes*; seer instantiates them
when they are used, so a plugin module stays cheap to import. Lifecycle hooks announce events and
their return values are ignored. Every hook is documented in docs/plugins.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable

    from seer.sandbox import Sandbox

hookspec = pluggy.HookspecMarker("seer")
hookimpl = pluggy.HookimplMarker("seer")


@hookspec
def seer_register_providers(register: Callable[..., None]) -> None:
    """Register provider classes: ``register(MyProvider)``.

    Each class subclasses :class:`seer.providers.base.Provider` and sets a unique ``name``.
    """


@hookspec
def seer_register_expose_modes(register: Callable[..., None]) -> None:
    """Register expose modes: ``register(MyExposeMode)``.

    An expose mode turns a served interface into what the agent gets (a library, MCP config,
    prompt text, a skill, ...). Each class subclasses :class:`seer.expose.ExposeMode`.
    """


@hookspec
def seer_register_execution_modes(register: Callable[..., None]) -> None:
    """Register execution modes: ``register(MyExecutionMode)``.

    An execution mode prepares a sandbox for one way of working (notebook, cli, local). Each
    class subclasses :class:`seer.sandbox.execution_mode.ExecutionModePlugin`.
    """


@hookspec
def seer_register_agent_runners(register: Callable[..., None]) -> None:
    """Register agent runners: ``register(MyAgentRunner)``.

    An agent runner drives one agent client (an agent SDK) for :func:`seer.harness.run_agent`.
    Each class subclasses :class:`seer.harness.AgentRunner`.
    """


@hookspec
def seer_register_commands(cli: Any) -> None:
    """Add sub-commands to the ``seer`` CLI; ``cli`` is its :class:`typer.Typer` app."""


@hookspec
def seer_sandbox_provisioned(sandbox: Sandbox) -> None:
    """A sandbox's machine exists and core bootstrap is about to run in it."""


@hookspec
def seer_sandbox_started(sandbox: Sandbox) -> None:
    """``Sandbox.start()`` finished: the sandbox is ready."""


@hookspec
def seer_sandbox_terminating(sandbox: Sandbox) -> None:
    """A sandbox is about to be terminated (called once, before the provider tears it down)."""


@hookspec
def seer_kernel_libraries(sandbox: Sandbox) -> list[Any]:
    """Libraries (:class:`seer.workspace.Library`) every notebook kernel of ``sandbox`` should be
    able to import: seer uploads them to ``.seer/toolkit`` and puts that folder on each kernel's
    ``sys.path`` (unless the sandbox's config turns ``toolkit`` off). seer-toolkit implements it."""
    return []

"""The plugin manager: discovers plugins and keeps what they register.

Built-in plugins (the local provider, the built-in modes) register through the same hooks as
third-party ones; third-party plugins are found through the ``seer`` entry-point group and loaded
lazily, the first time anything asks for a registry.

Two environment variables steer loading, read once at load time:

``SEER_LOAD_PLUGINS``
    Comma-separated entry-point names: load only these third-party plugins (empty: none).
``SEER_DISABLE_PLUGINS``
    Comma-separated plugin names (entry-point or built-in) not to load.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any

import pluggy

from seer import hookspecs
from seer.errors import OUR_VERSIONS, PluginError, UnknownPluginError

if TYPE_CHECKING:
    from seer.expose import ExposeMode
    from seer.harness.runner import AgentRunner
    from seer.providers.base import Provider
    from seer.sandbox.execution_mode import ExecutionModePlugin

ENTRY_POINT_GROUP = "seer"

#: Built-in plugins (``module:object``, as an entry point names one), registered exactly like
#: entry-point plugins; both live in :mod:`seer.builtin`.
BUILTIN_PLUGINS: dict[str, str] = {
    "local": "seer.builtin:LocalProviderPlugin",
    "builtin-modes": "seer.builtin:BuiltinModes",
}

#: Names published by seer's own optional members, and the extra that installs each.
KNOWN_EXTRAS: dict[str, str] = {
    "docker": "seer[docker]",
    "ssh": "seer[ssh]",
    "runpod": "seer[runpod]",
    "modal": "seer[modal]",
    "mcp": "seer[mcp]",
    "claude": "seer[claude]",
    "openai": "seer[openai]",
}
#: What each of those names is (a provider, an expose mode), so a hint is given only for its kind.
KNOWN_KINDS: dict[str, str] = {
    "docker": "provider",
    "ssh": "provider",
    "runpod": "provider",
    "modal": "provider",
    "mcp": "expose mode",
    "claude": "agent runner",
    "openai": "agent runner",
}

CORE_DISTRIBUTION = "seer-core"


@dataclass(frozen=True)
class Registration:
    """One registered class, and where it came from."""

    name: str
    cls: type
    plugin: str
    distribution: str


@dataclass
class LoadedPlugin:
    """A plugin module that was loaded (or skipped, with why)."""

    name: str
    distribution: str
    version: str | None
    builtin: bool
    hooks: list[str] = field(default_factory=list)
    skipped: str | None = None


class _Registry:
    """Name -> class for one kind of thing, refusing a name registered twice."""

    def __init__(self, kind: str):
        self.kind = kind
        self.items: dict[str, Registration] = {}

    def register_from(self, plugin: str, distribution: str) -> Callable[..., None]:
        def register(cls: type, name: str | None = None) -> None:
            reg_name = name or getattr(cls, "name", None)
            if not isinstance(reg_name, str) or not reg_name:
                raise PluginError(
                    f"plugin {plugin!r} ({distribution}) registered {self.kind} {cls!r} "
                    "without a name; set the class attribute `name`"
                )
            if reg_name in self.items:
                other = self.items[reg_name]
                raise PluginError(
                    f"{self.kind} name {reg_name!r} is registered twice: by {other.plugin!r} "
                    f"from distribution {other.distribution!r} and by {plugin!r} from "
                    f"distribution {distribution!r}; uninstall one, or disable it with "
                    "SEER_DISABLE_PLUGINS"
                )
            self.items[reg_name] = Registration(reg_name, cls, plugin, distribution)

        return register


class _State:
    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: dict[str, LoadedPlugin] = {}
        self.providers = _Registry("provider")
        self.expose_modes = _Registry("expose mode")
        self.execution_modes = _Registry("execution mode")
        self.agent_runners = _Registry("agent runner")
        self.provider_instances: dict[str, Provider] = {}


_state: _State | None = None
_lock = threading.RLock()


def _split_env(name: str) -> set[str] | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def _load() -> _State:
    state = _State()
    disabled = _split_env("SEER_DISABLE_PLUGINS") or set()
    only = _split_env("SEER_LOAD_PLUGINS")
    core_version = _dist_version(CORE_DISTRIBUTION)

    for name, module_name in BUILTIN_PLUGINS.items():
        if name in disabled:
            state.plugins[name] = LoadedPlugin(
                name, CORE_DISTRIBUTION, core_version, True, skipped="SEER_DISABLE_PLUGINS"
            )
            continue
        module_path, _, attr = module_name.partition(":")
        module = importlib.import_module(module_path)
        state.pm.register(getattr(module, attr) if attr else module, name=name)
        state.plugins[name] = LoadedPlugin(name, CORE_DISTRIBUTION, core_version, True)

    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist else "unknown"
        version = ep.dist.version if ep.dist else None
        if ep.name in state.plugins:
            continue  # the same distribution seen twice on sys.path
        skip = (
            "SEER_DISABLE_PLUGINS"
            if ep.name in disabled
            else "not in SEER_LOAD_PLUGINS"
            if only is not None and ep.name not in only
            else None
        )
        if skip:
            state.plugins[ep.name] = LoadedPlugin(ep.name, dist, version, False, skipped=skip)
            continue
        try:
            module = ep.load()
        except Exception as exc:
            raise PluginError(
                f"plugin {ep.name!r} from distribution {dist!r} failed to import: {type(exc).__name__}: {exc}"
            ) from exc
        state.pm.register(module, name=ep.name)
        state.plugins[ep.name] = LoadedPlugin(ep.name, dist, version, False)

    try:
        state.pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"a plugin implements a hook seer does not have: {exc}") from exc

    for plugin_name, plugin in state.plugins.items():
        registered = state.pm.get_plugin(plugin_name)
        if registered is None:
            continue
        plugin.hooks = sorted(
            hc.name for hc in state.pm.get_hookcallers(registered) or [] if hc.name.startswith("seer_")
        )
        _call_one(state, plugin_name, "seer_register_providers", state.providers)
        _call_one(state, plugin_name, "seer_register_expose_modes", state.expose_modes)
        _call_one(state, plugin_name, "seer_register_execution_modes", state.execution_modes)
        _call_one(state, plugin_name, "seer_register_agent_runners", state.agent_runners)
    return state


def _call_one(state: _State, plugin_name: str, hook: str, registry: _Registry) -> None:
    """Call one plugin's implementation of a registration hook, tagging what it registers."""
    module = state.pm.get_plugin(plugin_name)
    impl = getattr(module, hook, None)
    if impl is None:
        return
    plugin = state.plugins[plugin_name]
    impl(register=registry.register_from(plugin_name, plugin.distribution))


def _dist_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _get() -> _State:
    global _state
    with _lock:
        if _state is None:
            _state = _load()
        return _state


def reset() -> None:
    """Forget everything loaded, so the next lookup loads plugins again (tests use this)."""
    global _state
    with _lock:
        _state = None


def get_plugin_manager() -> pluggy.PluginManager:
    """The loaded :class:`pluggy.PluginManager` (for calling lifecycle hooks)."""
    return _get().pm


def loaded_plugins() -> list[LoadedPlugin]:
    """Every plugin seen, loaded or skipped, built-ins first."""
    return list(_get().plugins.values())


def providers() -> dict[str, Registration]:
    """Registered providers by name."""
    return dict(_get().providers.items)


def expose_modes() -> dict[str, Registration]:
    """Registered expose modes by name."""
    return dict(_get().expose_modes.items)


def execution_modes() -> dict[str, Registration]:
    """Registered execution modes by name."""
    return dict(_get().execution_modes.items)


def agent_runners() -> dict[str, Registration]:
    """Registered agent runners (the ``run_agent`` harness's agent clients) by name."""
    return dict(_get().agent_runners.items)


def install_hint(kind: str, name: str) -> str | None:
    """How to install the ``kind`` (``provider``, ``expose mode``, ``execution mode``,
    ``agent runner``) named
    ``name`` when one of seer's own optional members provides it; None otherwise."""
    key = name.strip().lower()
    if KNOWN_KINDS.get(key) != kind:
        return None
    return f'Install it with: pip install "{KNOWN_EXTRAS[key]}{OUR_VERSIONS}"'


def _lookup(registry: dict[str, Registration], kind: str, name: str) -> type:
    try:
        return registry[name].cls
    except KeyError:
        raise UnknownPluginError(kind, name, registry, install_hint(kind, name)) from None


def get_provider_class(name: str) -> type[Provider]:
    """The provider class registered as ``name``; the error lists what is installed."""
    return _lookup(providers(), "provider", name)


def get_provider(name: str) -> Provider:
    """A (cached) instance of the provider registered as ``name``."""
    state = _get()
    with _lock:
        if name not in state.provider_instances:
            state.provider_instances[name] = get_provider_class(name)()
        return state.provider_instances[name]


def get_expose_mode(name: str) -> type[ExposeMode]:
    """The expose mode class registered as ``name``."""
    return _lookup(expose_modes(), "expose mode", name)


def get_execution_mode(name: str) -> type[ExecutionModePlugin]:
    """The execution mode class registered as ``name``."""
    return _lookup(execution_modes(), "execution mode", name)


def get_agent_runner(name: str) -> type[AgentRunner]:
    """The agent runner class registered as ``name``."""
    return _lookup(agent_runners(), "agent runner", name)


def hook() -> Any:
    """The hook relay, for announcing lifecycle events: ``hook().seer_sandbox_started(...)``."""
    return get_plugin_manager().hook

"""The resolve step: a config's values against what is installed here, before anything is made.

:mod:`seer.config` validates a config's shape and values alone, without loading any plugin.
Everything that needs the plugin registry or this machine is checked here, in one place that
:meth:`seer.Sandbox.start` and the CLI call first:

* ``provider`` (or ``$SEER_PROVIDER``) names an installed provider (the error lists those and the
  extra that installs a known one);
* ``execution_mode`` names a registered mode (case aside);
* ``gpu`` is a GPU seer's catalogue or an installed provider knows;
* the provider takes the config (``Provider.check_config``: its GPUs, options, limits);
* every secret is set, in the environment or ``.env``.

Every problem found is reported at once, each naming its field, as one
:class:`~seer.errors.ConfigError` (a :class:`~seer.errors.MissingSecretError` when missing secrets
are the only problem). What passes comes back as a :class:`Preflight`: the classes resolved and
the secret values, so nothing after it asks the registry for them again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from seer import plugins
from seer.config import GPU_CATALOGUE, ExecutionMode, SandboxConfig
from seer.config.gpus import unknown_gpu_message
from seer.config.secrets import resolve_secrets
from seer.errors import ConfigError, ConfigProblem, MissingSecretError, UnknownPluginError
from seer.ids import providers_for_id

if TYPE_CHECKING:
    from seer.providers.base import Provider
    from seer.sandbox.execution_mode import ExecutionModePlugin

__all__ = ["Preflight", "known_gpu_types", "preflight", "provider_classes", "sandbox_id_providers"]


@dataclass(frozen=True)
class Preflight:
    """What a config resolved to: the provider and execution mode it runs with, and the secrets."""

    #: The config, with ``execution_mode`` spelled as its mode is registered.
    config: SandboxConfig
    provider_name: str
    provider_class: type[Provider]
    execution_mode: type[ExecutionModePlugin]
    #: The secrets' values by name (never printed or logged).
    secrets: Mapping[str, str]

    def provider(self) -> Provider:
        """The provider instance (one per process and name, shared)."""
        return plugins.get_provider(self.provider_name)


def provider_classes() -> dict[str, type[Provider]]:
    """Every installed provider's class, by name (one that fails to load is left out)."""
    out: dict[str, type[Provider]] = {}
    for name in plugins.providers():
        try:
            out[name] = plugins.get_provider_class(name)
        except Exception:  # a provider that cannot load offers nothing here
            continue
    return out


def known_gpu_types() -> set[str]:
    """Every GPU name seer (:data:`~seer.config.GPU_CATALOGUE`) or an installed provider understands."""
    names = set(GPU_CATALOGUE)
    for cls in provider_classes().values():
        names |= set(cls.capabilities.gpu_types)
    return names


def sandbox_id_providers(sandbox_id: object, *, argument: str = "sandbox_id") -> list[str]:
    """The installed providers whose id format ``sandbox_id`` has (the only ones that may know it).

    Raises :class:`~seer.errors.InvalidSandboxIdError` naming ``argument`` when there is none."""
    return providers_for_id(sandbox_id, provider_classes(), argument=argument)


def _execution_mode(value: ExecutionMode | str) -> tuple[str, ConfigProblem | None]:
    """The registered name ``value`` means (case aside), or a problem listing the registered ones."""
    registered = list(plugins.execution_modes())
    wanted = str(value)
    match = next((n for n in registered if n == wanted), None) or next(
        (n for n in registered if n.lower() == wanted.strip().lower()), None
    )
    if match is not None:
        return match, None
    ordered = [m.value for m in ExecutionMode] + sorted(set(registered) - {m.value for m in ExecutionMode})
    hint = plugins.install_hint("execution mode", wanted)
    listing = ", ".join(repr(n) for n in ordered)
    message = f"unknown execution mode {wanted!r}; registered modes: {listing}" + (
        f". {hint}" if hint else ""
    )
    return wanted, ConfigProblem("execution_mode", message)


def _title(name: str, provider_cls: type[Provider] | None, problems: list[ConfigProblem]) -> str:
    """The heading of a preflight's error: it fits every problem listed under it."""
    if provider_cls is not None:
        return f"Config not valid for provider {name!r}"
    others = sum(p.field != "provider" for p in problems)
    if not others:
        return "Unknown provider"
    return (
        f"Config not valid: unknown provider {name!r}, and {others} more problem{'s' if others > 1 else ''}"
    )


def preflight(config: SandboxConfig, *, dotenv: str | os.PathLike[str] | None = ".env") -> Preflight:
    """Check ``config`` against the installed plugins, its provider and this machine.

    Raises :class:`~seer.errors.ConfigError` (naming every field at fault) for a provider,
    execution mode or GPU that nothing installed knows, a GPU or option the provider does not
    offer, a provider that cannot be used here, or a missing secret;
    :class:`~seer.errors.MissingSecretError` when secrets are the only problem. Nothing is
    provisioned.
    """
    problems: list[ConfigProblem] = []
    name = config.provider_name
    provider_cls: type[Provider] | None = None
    try:
        provider_cls = plugins.get_provider_class(name)
    except UnknownPluginError as exc:  # names what is installed and the extra to install
        from_env = not config.provider and os.environ.get("SEER_PROVIDER")
        lead = "$SEER_PROVIDER names a provider that is not installed: " if from_env else ""
        problems.append(ConfigProblem("provider", f"{lead}{exc}"))

    mode_name, mode_problem = _execution_mode(config.execution_mode)
    if mode_problem is not None:
        problems.append(mode_problem)
    elif mode_name != config.execution_mode:
        config = config.model_copy(update={"execution_mode": mode_name})

    known_gpu = True
    if config.gpu is not None:
        known = known_gpu_types()
        if config.gpu not in known:
            known_gpu = False
            problems.append(ConfigProblem("gpu", unknown_gpu_message(config.gpu, known)))

    # The provider's own checks read the config's values as valid names: only once they are.
    if provider_cls is not None and known_gpu and mode_problem is None:
        problems += provider_cls.check_config(config)
    source = config.source  # a config read from a file: each problem names its file and line
    try:
        values = resolve_secrets(config.secrets, dotenv=dotenv)
    except MissingSecretError as exc:
        if not problems:
            if source is None:
                raise
            raise MissingSecretError(source.locate(exc.problems), title=exc.title) from None
        problems += exc.problems
    if problems:
        raise ConfigError(
            source.locate(problems) if source else problems, title=_title(name, provider_cls, problems)
        )
    assert provider_cls is not None
    return Preflight(
        config=config,
        provider_name=name,
        provider_class=provider_cls,
        execution_mode=plugins.get_execution_mode(mode_name),
        secrets=values,
    )

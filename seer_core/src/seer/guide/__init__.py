"""seer's guide for agents: the ``SKILL.md`` that teaches an agent to use seer (an agent skill).

Named ``guide`` because "skill" already names two other things: :class:`seer.workspace.Skill`
(any skill folder given to an agent) and the ``skill`` expose mode (:mod:`seer.expose.modes`).

The text is package data (``SKILL.md.tmpl``, next to this module); the facts that live in code
(the config fields, the GPU catalogue, the version) are filled in from the code when it is
rendered, so the skill never disagrees with the installed seer. ``tests/test_skill.py`` runs
every Python example in it.

::

    seer skill install [DIR]      # writes DIR/seer/SKILL.md (default DIR: ./.claude/skills)
    seer skill show               # prints it

From Python, :func:`skill` is the :class:`~seer.workspace.Skill` (to put in a
:class:`~seer.workspace.Workspace`) and :func:`install` writes it.
"""

from __future__ import annotations

import os
import re
import typing
from importlib import resources
from pathlib import Path

import yaml

from seer.config.fieldtext import default_text, type_text
from seer.errors import SeerError

if typing.TYPE_CHECKING:
    from pydantic import BaseModel

    from seer.workspace import Skill

__all__ = ["DEFAULT_DIR", "NAME", "install", "render", "skill"]

#: The skill's name (its folder under the skills directory).
NAME = "seer"
#: Where ``seer skill install`` puts skills by default: the project's Claude Code skills folder.
DEFAULT_DIR = os.path.join(".claude", "skills")
_TEMPLATE = "SKILL.md.tmpl"
_MARKER = re.compile(r"@@([A-Z_]+)@@")


def _field_table(model: type[BaseModel]) -> str:
    rows = ["| field | type | default | what it is |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        kind = type_text(field.annotation).replace("|", "\\|")
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | `{kind}` | {default_text(field)} | {description} |")
    return "\n".join(rows)


def _gpu_table() -> str:
    """One row per GPU of :data:`seer.config.GPU_CATALOGUE`, with what fits on one in bfloat16."""
    from seer.config import GPU_CATALOGUE

    rows = [
        "| `gpu=` | what it is | largest model on one (bfloat16, ~20% headroom) |",
        "|---|---|---|",
    ]
    for name, what in GPU_CATALOGUE.items():
        match = re.search(r"(\d+)\s*GB", what)
        fits = f"~{int(int(match.group(1)) * 0.8 / 2)}B parameters" if match else "see the provider"
        rows.append(f"| `{name!r}` | {what} | {fits} |".replace("'", '"'))
    rows.append("| `None` | CPU only | small models, slowly (float32) |")
    return "\n".join(rows)


def _provider_options() -> str:
    """One table per installed provider that takes ``provider_options``, from its options model."""
    from seer import plugins

    parts = []
    for name, registration in sorted(plugins.providers().items()):
        model = getattr(registration.cls, "options_model", None)
        if model is None:
            continue
        parts.append(f'`provider="{name}"`:\n\n{_field_table(model)}')
    return "\n\n".join(parts) or "(no installed provider takes options)"


def _version() -> str:
    import seer

    return f"version {seer.__version__}"


def render() -> str:
    """The text of ``SKILL.md``: the template with the code's facts filled in."""
    from seer.config import ModelConfig, RepoConfig, SandboxConfig

    template = resources.files(__package__).joinpath(_TEMPLATE).read_text(encoding="utf-8")
    fills = {
        "VERSION": _version,
        "SANDBOX_CONFIG_TABLE": lambda: _field_table(SandboxConfig),
        "MODEL_CONFIG_TABLE": lambda: _field_table(ModelConfig),
        "REPO_CONFIG_TABLE": lambda: _field_table(RepoConfig),
        "GPU_TABLE": _gpu_table,
        "PROVIDER_OPTIONS": _provider_options,
    }

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in fills:
            raise SeerError(f"{_TEMPLATE}: unknown marker @@{key}@@")
        return fills[key]().strip("\n")

    return _MARKER.sub(fill, template)


def skill() -> Skill:
    """seer's skill as a :class:`~seer.workspace.Skill` (name ``seer``)."""
    from seer.workspace import Skill

    text = render()
    _, front, body = text.split("---\n", 2)
    meta = yaml.safe_load(front)
    return Skill(meta.pop("name"), meta.pop("description"), body, metadata=meta)


def install(directory: str | os.PathLike[str] = DEFAULT_DIR) -> Path:
    """Write the skill as ``<directory>/seer/SKILL.md`` (replacing an older one); return that path."""
    return skill().install_into(Path(directory).expanduser()) / "SKILL.md"

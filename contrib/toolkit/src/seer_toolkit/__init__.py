"""seer-toolkit: the interpretability toolkit seer puts in notebook kernels, and its files.

The toolkit itself is a set of top-level modules meant to run *inside* a sandbox's kernel, next to
torch and transformers (``from steering_hook import create_steering_hook``). They ship here as
package data under :data:`MODULES_DIR`, not as importable submodules, so this package stays cheap
to import on a client without torch:

- :func:`libraries` returns them as :class:`seer.workspace.Library` objects, for a
  ``Workspace`` of a scoped sandbox, a CLI session or a skill;
- seer's notebook mode puts them on every kernel's ``sys.path`` when this distribution is
  installed and the sandbox's ``toolkit`` setting is on (the default);
- :func:`research_methodology` returns ``research_methodology.md``, the research guidance seed
  agents are handed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seer.workspace import Library

__all__ = [
    "METHODOLOGY_PATH",
    "MODULES",
    "MODULES_DIR",
    "libraries",
    "module_path",
    "research_methodology",
]

#: The directory holding the toolkit's modules and ``research_methodology.md``.
MODULES_DIR = Path(__file__).resolve().parent / "modules"
#: The toolkit's modules, each with the toolkit modules it imports.
MODULES: dict[str, tuple[str, ...]] = {
    "model_layers": (),
    "activation_cache": ("model_layers",),
    "steering_hook": ("model_layers",),
    "extract_activations": ("model_layers", "activation_cache"),
    "generate_response": ("model_layers",),
    "activation_patching": ("model_layers", "activation_cache"),
    "logit_lens": ("model_layers", "activation_cache"),
    "ablation": ("model_layers",),
}
METHODOLOGY_PATH = MODULES_DIR / "research_methodology.md"


def module_path(name: str) -> Path:
    """The file of toolkit module ``name`` (``"steering_hook"`` -> ``.../steering_hook.py``)."""
    if name not in MODULES:
        raise ValueError(f"no toolkit module {name!r}; the modules are: {', '.join(MODULES)}")
    return MODULES_DIR / f"{name}.py"


def libraries(names: Iterable[str] | None = None) -> list[Library]:
    """The toolkit's modules as single-file :class:`~seer.workspace.Library` objects: ``names``
    (default: all) plus every toolkit module they import, dependencies first."""
    from seer.workspace import Library

    wanted = list(MODULES) if names is None else list(names)
    for name in wanted:
        module_path(name)  # a clear error for an unknown name
    chosen = {dep for name in wanted for dep in (*MODULES[name], name)}
    return [Library.from_file(module_path(name)) for name in MODULES if name in chosen]


def research_methodology() -> str:
    """The text of ``research_methodology.md``: principles for an investigation, for the agent."""
    return METHODOLOGY_PATH.read_text(encoding="utf-8")

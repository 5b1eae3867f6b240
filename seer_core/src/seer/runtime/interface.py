"""Load an interface file and find its ``@expose`` functions (runs inside the sandbox).

An interface file is an ordinary Python module with three names injected into its globals, and
nothing else::

    expose                   the decorator marking a module-level function as served
    get_model_path           seer.runtime.models.get_model_path
    list_configured_models   seer.runtime.models.list_configured_models

:func:`load_interface` checks the file first (:func:`seer.rpc.spec.inspect_interface`: syntax,
at least one exposed function, no ``*args`` / ``**kwargs``), then runs it once as a module
registered in ``sys.modules`` under the interface's name, with the file's directory first on
``sys.path`` (so files uploaded beside it import) and any ``extra_paths`` (the workspace's
libraries) after it. Module-level state lives as long as the process: every call sees it.

Only the functions the file decorates with ``@expose`` at module level are served: private
helpers, module globals and the injected helpers are not reachable over RPC.
"""

from __future__ import annotations

import importlib.machinery
import inspect
import os
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from seer.errors import ConfigProblem, InterfaceError
from seer.rpc.spec import FunctionSpec, InterfaceInfo, inspect_interface
from seer.runtime.models import get_model_path, list_configured_models

__all__ = ["INJECTED", "LoadedInterface", "check_interface", "load_interface"]

#: The names an interface file finds in its globals without importing them.
INJECTED = ("expose", "get_model_path", "list_configured_models")

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class LoadedInterface:
    """An interface file loaded as a module: its exposed functions and their specs."""

    name: str
    path: str
    module: types.ModuleType
    #: name -> the exposed callable (nothing else is served)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    specs: dict[str, FunctionSpec] = field(default_factory=dict)
    doc: str = ""


def check_interface(path: str | os.PathLike[str]) -> InterfaceInfo:
    """Check an interface file (see :func:`seer.rpc.spec.inspect_interface`) without running it."""
    file = Path(path)
    if not file.is_file():
        raise InterfaceError([ConfigProblem("file", "no such file", file=str(file))])
    return inspect_interface(file.read_bytes(), str(file))


def _module_name(path: Path, name: str | None) -> str:
    candidate = name or path.stem
    if not candidate.isidentifier():
        candidate = "".join(c if c.isalnum() or c == "_" else "_" for c in candidate)
        if not candidate or candidate[0].isdigit():
            candidate = f"_{candidate}"
    return candidate


def _shadow_problem(module_name: str, path: Path) -> str | None:
    """Why ``module_name`` cannot be the interface's module name (it is taken), or None."""
    if module_name in sys.modules or module_name in sys.builtin_module_names:
        return f"the name {module_name!r} is already taken by an imported module"
    here = str(path.parent)
    search = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != here]
    found = importlib.machinery.PathFinder.find_spec(module_name, search)
    if found is not None and found.origin and Path(found.origin).resolve() != path:
        return f"the name {module_name!r} is also an installed module ({found.origin})"
    return None


def load_interface(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    extra_paths: Sequence[str] = (),
) -> LoadedInterface:
    """Check and run the interface file at ``path``; return its exposed functions.

    ``name`` is the module name (default: the file's stem). Raises
    :class:`~seer.errors.InterfaceError` for a file that fails the check (or whose name shadows
    an installed module), and whatever the module's own code raises.
    """
    file = Path(path).resolve()
    info = check_interface(file)
    module_name = _module_name(file, name)
    problem = _shadow_problem(module_name, file)
    if problem:
        raise InterfaceError(
            [ConfigProblem("name", f"{problem}; serve the interface under another name", file=str(file))]
        )
    for entry in reversed([str(file.parent), *extra_paths]):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
    importlib.invalidate_caches()

    registry: dict[str, Callable[..., Any]] = {}

    def expose(fn: F) -> F:
        """Serve this module-level function over RPC."""
        if not callable(fn):
            raise TypeError(f"@expose decorates a function, not {type(fn).__name__}")
        fn_name = getattr(fn, "__name__", None) or repr(fn)
        registry[fn_name] = fn
        return fn

    module = types.ModuleType(module_name, info.doc or None)
    module.__file__ = str(file)
    module.__dict__.update(
        {"expose": expose, "get_model_path": get_model_path, "list_configured_models": list_configured_models}
    )
    code = compile(file.read_bytes(), str(file), "exec", dont_inherit=True)
    sys.modules[module_name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise

    loaded = LoadedInterface(module_name, str(file), module, doc=info.doc)
    missing = []
    for spec in info.functions:
        fn = registry.get(spec.name)
        if fn is None:
            missing.append(spec)
            continue
        loaded.functions[spec.name] = fn
        loaded.specs[spec.name] = spec
    if missing:
        raise InterfaceError(
            [
                ConfigProblem(
                    f"@expose {spec.name}",
                    "the function was not registered when the module ran (is `expose` redefined or "
                    "the function renamed by another decorator?)",
                    file=str(file),
                    line=spec.line,
                )
                for spec in missing
            ]
        )
    return loaded


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` gives a coroutine to run."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__wrapped__", None))

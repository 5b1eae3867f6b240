"""No module reaches into another's underscore names; what plugins need is public API.

import-linter (the contracts in pyproject.toml, run by ``nox -s lint`` and ``.ci/run``) checks
which modules import which; it cannot see *names*. This walks the source trees' syntax instead:

* no module outside seer-core (providers, plugins, contrib, examples, scripts) imports a private
  module of ``seer`` or a private name from it, or touches an attribute that only seer defines
  with a leading underscore (``sandbox._env``, ``session._save = ...``);
* no module of core does that with another core module's private names. A private *module*
  (``seer.providers._helpers``, say) is for the modules of its own package.

An attribute counts as seer's private name when some core module defines it (a ``_function``,
``_Class``, ``self._attr = ...`` or class attribute) and the module using it does not. Uses on
``self``, ``cls`` and ``super()`` are a class's own business. What is still allowed is listed, with
why, in ``private_names_allowed.txt`` beside this file; every entry must still be needed.
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
CORE_SRC = ROOT / "seer_core" / "src"
#: Source trees outside core, as (glob, source root for module names or None for plain scripts).
OUTSIDE = [
    ("providers/*/src/**/*.py", "src"),
    ("plugins/*/src/**/*.py", "src"),
    ("tests/plugins/*/src/**/*.py", "src"),
    ("contrib/**/*.py", None),
    ("examples/**/*.py", None),
    ("scripts/*.py", None),
]
ALLOWED_FILE = Path(__file__).with_name("private_names_allowed.txt")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _defined_private(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, classes, assigned names, ``self._x``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
    return {n for n in names if _private(n)}


@dataclass(frozen=True)
class ReachIn:
    module: str
    line: int
    name: str
    what: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.what}"


class Core:
    """seer-core's modules, and the private names each defines."""

    def __init__(self) -> None:
        self.trees = {_module_name(p, CORE_SRC): ast.parse(p.read_text()) for p in CORE_SRC.rglob("*.py")}
        self.defined = {m: _defined_private(t) for m, t in self.trees.items()}
        self.all_private = set().union(*self.defined.values())

    def reach_ins(self, module: str, tree: ast.AST, *, in_core: bool) -> list[ReachIn]:
        own = self.defined.get(module) or _defined_private(tree)
        found = []

        def private_module(line: int, dotted: str) -> None:
            parts = dotted.split(".")
            for i, part in enumerate(parts):
                if _private(part):
                    package = ".".join(parts[:i])
                    if not (in_core and (module == package or module.startswith(package + "."))):
                        found.append(ReachIn(module, line, part, f"imports the private module {dotted}"))
                    return

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "seer":
                        private_module(node.lineno, alias.name)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] != "seer":
                    continue
                private_module(node.lineno, node.module)
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    if submodule in self.trees:
                        private_module(node.lineno, submodule)
                    elif _private(alias.name) and node.module != module:
                        what = f"from {node.module} import {alias.name}"
                        found.append(ReachIn(module, node.lineno, alias.name, what))
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                if isinstance(owner, ast.Call) and getattr(owner.func, "id", None) == "super":
                    continue
                if node.attr in self.all_private and not (in_core and node.attr in own):
                    found.append(ReachIn(module, node.lineno, node.attr, f"{ast.unparse(owner)}.{node.attr}"))
        return found


def _outside_modules() -> list[tuple[str, ast.AST]]:
    out = []
    for pattern, src in OUTSIDE:
        for path in sorted(ROOT.glob(pattern)):
            if src is not None:
                root = next(p for p in path.parents if p.name == src)
                name = _module_name(path, root)
            else:
                name = path.relative_to(ROOT).as_posix()
            out.append((name, ast.parse(path.read_text())))
    return out


def _allowed() -> set[tuple[str, str]]:
    """``(module, private name)`` pairs from the allow-list (``module name  # why`` lines)."""
    pairs = set()
    for line in ALLOWED_FILE.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            module, name = line.split()
            pairs.add((module, name))
    return pairs


def _all_reach_ins() -> list[ReachIn]:
    core = Core()
    found = [r for m, t in core.trees.items() for r in core.reach_ins(m, t, in_core=True)]
    found += [r for m, t in _outside_modules() for r in core.reach_ins(m, t, in_core=False)]
    return found


def test_no_module_uses_another_modules_private_names() -> None:
    allowed = _allowed()
    unexpected = [r for r in _all_reach_ins() if (r.module, r.name) not in allowed]
    assert not unexpected, (
        "private names used across modules (make what is needed public API instead):\n"
        + "\n".join(f"  {r}" for r in unexpected)
    )


def test_allow_list_has_no_stale_entries() -> None:
    used = {(r.module, r.name) for r in _all_reach_ins()}
    stale = sorted(_allowed() - used)
    assert not stale, f"remove these from {ALLOWED_FILE.name}, nothing uses them any more: {stale}"


def test_the_scan_finds_reach_ins() -> None:
    """The walker itself: each kind of reach-in it must see, in core and outside it."""
    core = Core()
    source = (
        "import seer.providers._procs\n"
        "from seer.config import _depth\n"
        "from seer.providers import _local_env\n"
        "def f(sandbox, session):\n"
        "    sandbox._services['x'] = 1\n"
        "    session._save = None\n"
        "    self._own = 1\n"
    )
    outside = {r.what for r in core.reach_ins("plugin.mod", ast.parse(source), in_core=False)}
    assert outside == {
        "imports the private module seer.providers._procs",
        "from seer.config import _depth",
        "from seer.providers import _local_env",  # no such module now: a private name all the same
        "sandbox._services",
        "session._save",
    }
    # inside core, a private module is for its own package's modules only
    inside = {r.what for r in core.reach_ins("seer.providers.local", ast.parse(source), in_core=True)}
    assert "imports the private module seer.providers._procs" not in inside
    assert "from seer.config import _depth" in inside and "sandbox._services" in inside
    elsewhere = {r.what for r in core.reach_ins("seer.cli", ast.parse(source), in_core=True)}
    assert "imports the private module seer.providers._procs" in elsewhere


def test_runtime_contract_names_every_client_side_module() -> None:
    """The ``runtime-standalone`` contract forbids the client side by listing it; a new module of
    core must be added there (or to the runtime's allowed leaf modules) to be covered."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c.get("id") == "runtime-standalone")
    allowed = {
        "seer",
        "seer.runtime",
        "seer.errors",
        "seer.kernel_names",
        "seer.rpc",
        "seer.rpc.spec",
        "seer.rpc.wire",
    }
    forbidden = set(contract["forbidden_modules"])
    uncovered = []
    for module in Core().trees:
        if module in allowed or module.startswith("seer.runtime."):
            continue
        parts = module.split(".")
        if not any(".".join(parts[:i]) in forbidden for i in range(1, len(parts) + 1)):
            uncovered.append(module)
    assert not uncovered, f"add to the runtime-standalone contract's forbidden_modules: {uncovered}"
    assert re.fullmatch(r"seer\.runtime", contract["source_modules"][0])


# --- seer-mcp: its modules use one another's public names only ---------------------------------
MCP_SRC = ROOT / "plugins" / "mcp" / "src"


def _mcp_reach_ins(trees: dict[str, ast.AST]) -> list[ReachIn]:
    """Uses, in one seer_mcp module, of a private name another seer_mcp module defines
    (``from seer_mcp.x import _y``, ``entry._writer``); a private module (``seer_mcp._stdio``) is
    for the package's own modules, as in core."""
    defined = {m: _defined_private(t) for m, t in trees.items()}
    found = []
    for module, tree in trees.items():
        others = set().union(*(names for m, names in defined.items() if m != module)) - defined[module]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] != "seer_mcp" or node.module == module:
                    continue
                for alias in node.names:
                    if _private(alias.name) and f"{node.module}.{alias.name}" not in trees:
                        found.append(
                            ReachIn(
                                module, node.lineno, alias.name, f"from {node.module} import {alias.name}"
                            )
                        )
            elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr in others:
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                if isinstance(owner, ast.Call) and getattr(owner.func, "id", None) == "super":
                    continue
                found.append(ReachIn(module, node.lineno, node.attr, f"{ast.unparse(owner)}.{node.attr}"))
    return found


def test_no_seer_mcp_module_uses_another_ones_private_names() -> None:
    trees = {_module_name(p, MCP_SRC): ast.parse(p.read_text()) for p in MCP_SRC.rglob("*.py")}
    assert "seer_mcp.registry" in trees
    found = _mcp_reach_ins(trees)
    assert not found, "private names used across seer_mcp's modules:\n" + "\n".join(f"  {r}" for r in found)


def test_the_seer_mcp_scan_finds_reach_ins() -> None:
    trees = {
        "seer_mcp.a": ast.parse(
            "def _helper(): pass\nclass A:\n    def __init__(self):\n        self._writer = 1\n"
        ),
        "seer_mcp.b": ast.parse("from seer_mcp.a import _helper\ndef f(entry):\n    return entry._writer\n"),
        "seer_mcp.c": ast.parse(
            "from seer_mcp._stdio import serve\nclass C:\n    def g(self):\n        return self._writer\n"
        ),
    }
    assert {r.what for r in _mcp_reach_ins(trees)} == {"from seer_mcp.a import _helper", "entry._writer"}


# --- no code in core sets another object's underscore attribute ----------------------------------
#: ``(module, attribute)`` pairs still allowed, with why. Not core's objects: a third party's, which
#: has no public way to say it.
POKES_ALLOWED = {
    # The hidden-model scrub: transformers keeps a model's hub id in these config attributes.
    ("seer.runtime.loading", "_name_or_path"),
    ("seer.runtime.loading", "_commit_hash"),
    # A marker seer sets on IPython's shell so its output cap is installed once.
    ("seer.runtime.kernel_output", "_seer_output_cap"),
}


def _pokes(tree: ast.AST) -> list[tuple[int, str, str]]:
    """``(line, attribute, text)`` for each assignment (or ``del``, or ``setattr`` with a literal
    name) to an underscore attribute of anything but ``self`` / ``cls``."""
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))
        ):
            found.append((node.lineno, node.args[1].value, ast.unparse(node)))
        for target in targets:
            for sub in ast.walk(target):
                if not (isinstance(sub, ast.Attribute) and _private(sub.attr)):
                    continue
                if isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"):
                    continue
                found.append((sub.lineno, sub.attr, ast.unparse(sub)))
    return found


def test_no_core_code_sets_another_objects_private_attribute() -> None:
    """A ``Sandbox`` is rebuilt from its record through its constructor, never by setting its
    privates from outside (``sandbox._machine = ...``); the same holds for every object in core."""
    found = {
        (module, attr): f"{module}:{line}: {text}"
        for module, tree in Core().trees.items()
        for line, attr, text in _pokes(tree)
    }
    unexpected = sorted(text for key, text in found.items() if key not in POKES_ALLOWED)
    assert not unexpected, "set another object's private attribute (pass it in instead):\n" + "\n".join(
        f"  {t}" for t in unexpected
    )
    stale = sorted(POKES_ALLOWED - set(found))
    assert not stale, f"remove from POKES_ALLOWED, nothing sets these any more: {stale}"


def test_the_poke_scan_finds_pokes() -> None:
    source = (
        "def f(sandbox, a):\n"
        "    sandbox._machine = 1\n"
        "    sandbox._env['x'] = 1\n"
        "    a.b._c += 1\n"
        "    del a._d\n"
        "    setattr(sandbox, '_e', 1)\n"
        "    self._own = 1\n"
        "    cls._own = 1\n"
        "    sandbox.public = 1\n"
        "    sandbox.__dict__ = {}\n"
    )
    assert [attr for _, attr, _ in _pokes(ast.parse(source))] == ["_machine", "_env", "_c", "_d", "_e"]

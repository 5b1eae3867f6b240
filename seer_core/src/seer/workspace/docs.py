"""A library's docs from its source, without importing it: each module's public API as stubs with
docstrings, read with :mod:`ast`."""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from seer.workspace.files import FileContent

if TYPE_CHECKING:
    pass

__all__ = ["demote_headings", "generated_docs", "module_docs"]


# --- docs from source, without importing it -------------------------------------------------
def _declared_all(tree: ast.Module) -> set[str] | None:
    """The names in a literal ``__all__``, if the module has one."""
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and isinstance(
            value, ast.List | ast.Tuple
        ):
            return {e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return None


def _docstring_lines(doc: str | None) -> list[str]:
    if not doc:
        return []
    doc = doc.replace('"""', r"\"\"\"")
    return [f'"""{doc}"""'] if "\n" not in doc else [f'"""{doc}', '"""']


def _function_stub(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    lines = []
    for deco in node.decorator_list:
        text = ast.unparse(deco)
        if text in ("property", "staticmethod", "classmethod") or text.endswith(".setter"):
            lines.append(f"@{text}")
    head = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    sig = f"{head} {node.name}({ast.unparse(node.args)})"
    if node.returns is not None:
        sig += f" -> {ast.unparse(node.returns)}"
    body = _docstring_lines(ast.get_docstring(node)) or ["..."]
    return [*lines, f"{sig}:", *(textwrap.indent(line, "    ") for line in body)]


def _class_stub(node: ast.ClassDef) -> list[str]:
    bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
    body = _docstring_lines(ast.get_docstring(node))
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and (
            not item.name.startswith("_") or item.name in ("__init__", "__call__")
        ):
            body += _function_stub(item)
    return [
        f"class {node.name}({', '.join(bases)}):" if bases else f"class {node.name}:",
        *(textwrap.indent(line, "    ") for line in body or ["..."]),
    ]


def _module_api(source: FileContent) -> tuple[str, str]:
    """A module's docstring and the stubs (signature + docstring) of its public functions and
    classes (those in ``__all__`` if it declares one, else those not starting with ``_``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(source)
    public = _declared_all(tree)
    stubs: list[str] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if (node.name not in public) if public is not None else node.name.startswith("_"):
            continue
        if stubs:
            stubs.append("")
        stubs += _function_stub(node) if not isinstance(node, ast.ClassDef) else _class_stub(node)
    return (ast.get_docstring(tree) or "").strip(), "\n".join(stubs)


def module_docs(source: FileContent) -> str:
    doc, stubs = _module_api(source)
    return "\n\n".join(p for p in (doc, f"```python\n{stubs}\n```" if stubs else "") if p)


def generated_docs(name: str, files: Mapping[str, FileContent]) -> str:
    """Docs for a library in canonical layout: its module's API, or for a package the API of
    ``__init__`` and of each public submodule."""
    if list(files) == [f"{name}.py"]:
        return module_docs(files[f"{name}.py"])
    parts = [module_docs(files[f"{name}/__init__.py"])]
    for path in sorted(files):
        rel = PurePosixPath(path).relative_to(name)
        if rel.suffix != ".py" or rel == PurePosixPath("__init__.py"):
            continue
        mod_parts = rel.with_suffix("").parts
        if mod_parts[-1] == "__init__":
            mod_parts = mod_parts[:-1]
        if any(p.startswith("_") for p in mod_parts):
            continue
        text = module_docs(files[path])
        if text:
            parts.append(f"**`{'.'.join((name, *mod_parts))}`**\n\n{text}")
    return "\n\n".join(p for p in parts if p)


def demote_headings(text: str, levels: int) -> str:
    """Markdown headings pushed down ``levels`` levels (outside code fences), so a library's
    own headings nest under the heading the workspace docs give it."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6}\s", line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)

"""The built-in expose modes: ``library``, ``prompt`` and ``skill``.

``ScopedSandbox.serve("interface.py", expose_as=...)`` serves an interface file's ``@expose``
functions over RPC and hands the served interface (its name, file, the endpoint's URL and token,
and each function's signature and docstring as source text) to the expose mode named by
``expose_as``. These three turn it into:

``library``
    a :class:`~seer.workspace.Library`: one generated module, ``<name>.py``, with a real function
    per exposed function (same parameters, kinds, literal defaults, annotations and docstring)
    that calls it in the sandbox. Put it in a :class:`~seer.workspace.Workspace`.
``prompt``
    Markdown for an agent's prompt: what the functions are and exactly how to call them with
    :class:`seer.rpc.RpcClient`.
``skill``
    a :class:`~seer.workspace.Skill`: ``SKILL.md`` saying how to use them, plus the generated
    module.

They are ways to hand over the same served interface: one serve can be exposed in several
modes (``expose_as=["library", "mcp"]``, or :meth:`seer.rpc.ServedInterface.expose` later), all
sharing its server and token.

The generated module never evaluates the interface's annotations (it starts with ``from
__future__ import annotations``), so it imports where the modules they name do not exist, and it
only reproduces defaults that are literals. A default that is not a literal (``layer=DEFAULT``)
becomes a marker whose ``repr`` is the original source text; an argument left at it is not sent,
so the sandbox applies its own default.
"""

from __future__ import annotations

import ast
import json
import keyword
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, ClassVar

from seer.errors import ConfigError, ConfigProblem
from seer.expose.base import ExposeMode
from seer.workspace import Library, Skill

__all__ = [
    "LibraryMode",
    "PromptMode",
    "SkillMode",
    "client_module_source",
    "interface_docs",
    "prompt_text",
]

_KINDS = ("positional_only", "positional_or_keyword", "var_positional", "keyword_only", "var_keyword")
#: how every name the generated module defines for itself starts (any case)
_PRIVATE = "_seer"
#: the longest skill description a Skill accepts
_MAX_DESCRIPTION = 1024


# --- the served interface, checked -----------------------------------------------------------
@dataclass(frozen=True)
class _Param:
    name: str
    kind: str
    #: the annotation as one normalised expression, or None
    annotation: str | None
    #: the default's source text, or None when there is none
    default: str | None
    #: True when ``default`` is a literal the client can reproduce
    literal: bool

    def _with_default(self, default: str | None) -> str:
        star = "*" if self.kind == "var_positional" else "**" if self.kind == "var_keyword" else ""
        out = f"{star}{self.name}"
        if self.annotation is not None:
            out += f": {self.annotation}"
        if default is not None:
            out += f" = {default}" if self.annotation is not None else f"={default}"
        return out

    def text(self) -> str:
        """How the parameter reads in a signature (original default text)."""
        return self._with_default(self.default)

    def code(self) -> str:
        """How the parameter is written in the generated module: a default that is not a literal
        becomes a marker showing its source text."""
        if self.default is None or self.literal:
            return self.text()
        return self._with_default(f"_SeerRemoteDefault({self.default!r})")


@dataclass(frozen=True)
class _Function:
    name: str
    params: tuple[_Param, ...]
    returns: str | None
    doc: str
    line: int

    def _parts(self, texts: list[str]) -> list[str]:
        """Parameter texts with the ``/`` and ``*`` markers the kinds need."""
        out: list[str] = []
        kinds = [p.kind for p in self.params]
        for i, text in enumerate(texts):
            kind = kinds[i]
            if kind == "keyword_only" and "var_positional" not in kinds and "keyword_only" not in kinds[:i]:
                out.append("*")
            out.append(text)
            if kind == "positional_only" and (i + 1 == len(kinds) or kinds[i + 1] != "positional_only"):
                out.append("/")
        return out

    def signature(self) -> str:
        """``name(params) -> returns``, as the interface file has it."""
        text = f"{self.name}({', '.join(self._parts([p.text() for p in self.params]))})"
        return text + (f" -> {self.returns}" if self.returns else "")

    def code_signature(self) -> str:
        """``name(params) -> returns`` as the generated module defines it (one parameter a line
        when long)."""
        parts = self._parts([p.code() for p in self.params])
        returns = f" -> {self.returns}" if self.returns else ""
        inner = ", ".join(parts)
        if len(self.name) + len(inner) + len(returns) > 90:
            inner = "\n" + "".join(f"    {part},\n" for part in parts)
        return f"{self.name}({inner}){returns}"


@dataclass(frozen=True)
class _Interface:
    name: str
    file: str
    url: str
    token: str
    functions: tuple[_Function, ...]
    #: the interface file's module docstring
    doc: str = ""

    @property
    def file_name(self) -> str:
        """The interface file's name, without its folders."""
        return PurePath(self.file).name or self.file


def _expression(text: object) -> ast.expr | None:
    """``text`` parsed as one Python expression, or None if it is not one."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None


def _annotation(text: object) -> str | None:
    """An annotation as one normalised expression; text that is not one is kept as a string."""
    if text is None:
        return None
    node = _expression(text)
    return ast.unparse(node) if node is not None else repr(str(text))


def _default(text: str) -> tuple[str, bool]:
    """A default's source text, and whether it is a literal (then normalised)."""
    node = _expression(text)
    if node is None:
        return text, False
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.unparse(node), False
    return ast.unparse(node), True


def _check(served: Any) -> _Interface:
    """The served interface, checked and normalised; every problem raised at once, naming the
    interface file and the function's line."""
    problems: list[ConfigProblem] = []
    name = getattr(served, "name", None)
    file = str(getattr(served, "file", "") or "")
    url, token = getattr(served, "url", None), getattr(served, "token", None)
    for attr, value in (("name", name), ("url", url), ("token", token)):
        if not isinstance(value, str) or not value:
            problems.append(
                ConfigProblem(attr, f"must be a non-empty string, got {value!r}", file=file or None)
            )
    if isinstance(name, str) and (not name.isidentifier() or keyword.iskeyword(name)):
        problems.append(
            ConfigProblem("name", f"{name!r} is not a valid Python identifier", file=file or None)
        )
    functions: list[_Function] = []
    seen: set[str] = set()
    for i, spec in enumerate(getattr(served, "functions", None) or ()):
        fname = getattr(spec, "name", None)
        line = getattr(spec, "line", None)
        where = f"functions[{fname if isinstance(fname, str) else i}]"

        def problem(message: str, where: str = where, line: Any = line) -> None:
            problems.append(
                ConfigProblem(where, message, file=file or None, line=line if isinstance(line, int) else None)
            )

        if not isinstance(fname, str) or not fname.isidentifier() or keyword.iskeyword(fname):
            problem(f"{fname!r} is not a valid function name")
            continue
        if fname.startswith("__") or fname.lower().startswith(_PRIVATE):
            problem(f"{fname!r}: an exposed function's name may not start with '__' or '_seer'")
            continue
        if fname in seen:
            problem(f"{fname!r} is exposed twice")
            continue
        seen.add(fname)
        params: list[_Param] = []
        ok = True
        for param in getattr(spec, "params", None) or ():
            pname, kind = getattr(param, "name", None), getattr(param, "kind", None)
            if not isinstance(pname, str) or not pname.isidentifier() or keyword.iskeyword(pname):
                problem(f"parameter {pname!r} is not a valid name")
                ok = False
                continue
            if pname.lower().startswith(_PRIVATE):
                problem(f"parameter {pname!r}: names starting with '_seer' are reserved")
                ok = False
                continue
            if kind not in _KINDS:
                problem(f"parameter {pname!r} has unknown kind {kind!r}")
                ok = False
                continue
            raw_default = getattr(param, "default", None)
            if raw_default is not None and kind in ("var_positional", "var_keyword"):
                raw_default = None
            default, literal = _default(str(raw_default)) if raw_default is not None else (None, False)
            params.append(
                _Param(pname, kind, _annotation(getattr(param, "annotation", None)), default, literal)
            )
        if ok:
            ordered = [_KINDS.index(p.kind) for p in params]
            if ordered != sorted(ordered) or any(
                ordered.count(_KINDS.index(k)) > 1 for k in ("var_positional", "var_keyword")
            ):
                problem("its parameters are not in a valid order")
                ok = False
        if ok:
            doc = getattr(spec, "doc", None)
            functions.append(
                _Function(
                    fname,
                    tuple(params),
                    _annotation(getattr(spec, "returns", None)),
                    doc if isinstance(doc, str) else "",
                    line if isinstance(line, int) else 0,
                )
            )
    if problems:
        raise ConfigError(problems, title=f"Cannot expose interface {name!r}")
    assert isinstance(name, str) and isinstance(url, str) and isinstance(token, str)
    doc = getattr(served, "doc", "")
    return _Interface(name, file, url, token, tuple(functions), doc.strip() if isinstance(doc, str) else "")


# --- the generated client module -------------------------------------------------------------
def _docstring(doc: str, indent: str) -> list[str]:
    """``doc`` as a triple-quoted literal (indented for a body), or as ``repr`` when it cannot be
    written that way and read back the same."""
    if not doc:
        return []
    if not all(c.isprintable() or c in "\n\t" for c in doc):  # \r, NUL, ...: spelled out
        return [indent + repr(doc)]
    escaped = doc.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if escaped.endswith('"'):
        escaped = escaped[:-1] + '\\"'
    literal = f'"""{escaped}"""'
    try:
        if ast.literal_eval(literal) != doc:
            raise ValueError
    except (ValueError, SyntaxError):
        return [indent + repr(doc)]
    lines = literal.split("\n")
    if len(lines) > 1:
        lines[-1] = lines[-1].removesuffix('"""')
        lines.append('"""')
    return [indent + lines[0]] + [(indent + line) if line.strip() else "" for line in lines[1:]]


_RUNTIME = '''\
from __future__ import annotations

import builtins as _seer_builtins
import inspect as _seer_inspect
import threading as _seer_threading

__all__ = {all!r}

_SEER_NAME = {name!r}
_SEER_URL = {url!r}
_SEER_TOKEN = {token!r}
#: seconds a call may run in the sandbox (None: no limit); change it to change every later call
_SEER_TIMEOUT = 300.0
_seer_client = None
_seer_lock = _seer_threading.Lock()


class _SeerRemoteDefault:
    """The default of a parameter whose default in the sandbox is not a literal: an argument left
    at it is not sent, so the sandbox applies its own default."""

    __slots__ = ("source",)

    def __init__(self, source):
        self.source = source

    def __repr__(self):
        return self.source


def _seer_rpc():
    """This module's RPC client, made on first use."""
    global _seer_client
    with _seer_lock:
        if _seer_client is None:
            from seer.rpc import RpcClient

            _seer_client = RpcClient(_SEER_URL, _SEER_TOKEN)
        return _seer_client


def _seer_same(value, default):
    b = _seer_builtins
    try:
        return value is default or (b.type(value) is b.type(default) and b.bool(value == default))
    except _seer_builtins.Exception:
        return False


def _seer_call(function, values):
    """Call ``function`` in the sandbox with the arguments its stub received (``values``)."""
    kinds = _seer_inspect.Parameter
    args, kwargs, by_name, extra = [], {{}}, [], ()
    skipped = None  # the first positional-only parameter left to the sandbox's default
    for param in _seer_inspect.signature(_seer_builtins.globals()[function]).parameters.values():
        value = values[param.name]
        remote = value.__class__ is _SeerRemoteDefault
        if param.kind is kinds.POSITIONAL_ONLY:
            if remote:
                skipped = skipped or param.name
            elif skipped is None:
                args.append(value)
            elif not _seer_same(value, param.default):
                raise _seer_builtins.TypeError(
                    f"{{function}}(): to pass {{param.name!r}}, pass {{skipped!r}} too"
                )
        elif param.kind is kinds.POSITIONAL_OR_KEYWORD:
            by_name.append((param.name, value, remote))
        elif param.kind is kinds.VAR_POSITIONAL:
            extra = value
        elif param.kind is kinds.KEYWORD_ONLY:
            if not remote:
                kwargs[param.name] = value
        else:
            kwargs.update(value)
    if extra:
        for name, value, remote in by_name:
            if remote or skipped:
                raise _seer_builtins.TypeError(
                    f"{{function}}(): to pass extra positional arguments, pass {{skipped or name!r}} too"
                )
            args.append(value)
        args.extend(extra)
    else:
        kwargs.update({{name: value for name, value, remote in by_name if not remote}})
    return _seer_rpc().invoke(function, args, kwargs, timeout=_SEER_TIMEOUT)'''


def _module_doc(iface: _Interface) -> str:
    return (
        f"The ``{iface.name}`` functions, served from ``{iface.file_name}`` in a seer sandbox.\n\n"
        + (f"{iface.doc}\n\n" if iface.doc else "")
        + "Calling one runs it in the sandbox over RPC (``seer.rpc.RpcClient``) and returns its result;\n"
        "an error raised there comes back as ``seer.rpc.RemoteError``. A default shown as a name\n"
        "rather than a value is the sandbox's own: leave the argument out to use it. A call may run\n"
        f"for ``{iface.name}._SEER_TIMEOUT`` seconds (300; None: no limit).\n\n"
        "Generated by seer's ``library`` expose mode."
    )


def _client_source(iface: _Interface) -> str:
    parts = [
        "\n".join(_docstring(_module_doc(iface), "")),
        "",
        _RUNTIME.format(
            all=[f.name for f in iface.functions], name=iface.name, url=iface.url, token=iface.token
        ),
    ]
    for fn in iface.functions:
        body = [*_docstring(fn.doc, "    "), f"    return _seer_call({fn.name!r}, _seer_builtins.locals())"]
        parts += ["", "", f"def {fn.code_signature()}:", *body]
    return "\n".join(parts) + "\n"


def client_module_source(served: Any) -> str:
    """The source of the client module for ``served``: one function per exposed function, with
    its signature and docstring, each calling it in the sandbox."""
    return _client_source(_check(served))


# --- docs ------------------------------------------------------------------------------------
def _stubs(iface: _Interface) -> str:
    blocks = []
    for fn in iface.functions:
        body = _docstring(fn.doc, "    ") or ["    ..."]
        blocks.append("\n".join([f"def {fn.signature()}:", *body]))
    return "\n\n".join(blocks)


def _docs(iface: _Interface) -> str:
    intro = (
        f"Functions served from `{iface.file_name}` in a seer sandbox: calling one runs it there, over "
        "RPC, and returns its result. An error raised there comes back as `seer.rpc.RemoteError` "
        "(its `remote_type`, `message` and `traceback` say what went wrong)."
    )
    if any(p.default is not None and not p.literal for f in iface.functions for p in f.params):
        intro += " A default written as a name rather than a value is applied in the sandbox."
    if iface.doc:
        intro = f"{iface.doc}\n\n{intro}"
    if not iface.functions:
        return intro + "\n\nIt exposes no functions."
    return f"{intro}\n\n```python\n{_stubs(iface)}\n```"


def interface_docs(served: Any) -> str:
    """Markdown listing the served functions' signatures and docstrings (the library's docs)."""
    return _docs(_check(served))


_PLACEHOLDERS = {
    "str": '"text"',
    "int": "0",
    "float": "0.0",
    "bool": "False",
    "bytes": 'b""',
    "list": "[]",
    "dict": "{}",
    "tuple": "()",
    "set": "set()",
}


def _placeholder(annotation: str | None) -> str:
    """An example value for a parameter of this annotation."""
    if annotation is None:
        return "None"
    base = re.split(r"[\[|]", annotation.strip("'\""), maxsplit=1)[0].strip()
    base = {"List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set"}.get(base.rsplit(".", 1)[-1], base)
    return _PLACEHOLDERS.get(base, "None")


def _example_args(fn: _Function) -> list[str]:
    """Example arguments for ``fn``'s required parameters (positional-only ones by position)."""
    args = []
    for p in fn.params:
        if p.default is not None or p.kind in ("var_positional", "var_keyword"):
            continue
        value = _placeholder(p.annotation)
        args.append(value if p.kind == "positional_only" else f"{p.name}={value}")
    return args


def _example_call(client: str, fn: _Function) -> str:
    """``client.call("fn", ...)`` with example values for the required parameters."""
    return f"{client}.call({', '.join([_quoted(fn.name), *_example_args(fn)])})"


def _quoted(text: str) -> str:
    """``text`` as a double-quoted Python string literal."""
    return json.dumps(text) if text.isascii() and text.isprintable() else repr(text)


def _client_var(name: str) -> str:
    return name if name not in ("RpcClient", "RemoteError", "result", "print") else "client"


def _prompt(iface: _Interface) -> str:
    client = _client_var(iface.name)
    # The snippet calls a function that needs no arguments if there is one.
    example = next((f for f in iface.functions if not _example_args(f)), None)
    example = example or (iface.functions[0] if iface.functions else None)
    snippet = [
        "from seer.rpc import RpcClient",
        "",
        f"{client} = RpcClient({_quoted(iface.url)}, {_quoted(iface.token)})",
    ]
    if example is not None:
        snippet += ["", f"result = {_example_call(client, example)}", "print(result)"]
    names = ", ".join(f"`{f.name}`" for f in iface.functions) or "none"
    lines = [
        f"# Tools: `{iface.name}`",
        "",
        f"These Python functions run in a remote sandbox (served from `{iface.file_name}`): {names}. "
        "Call them from Python over RPC with `seer.rpc.RpcClient` (from the `seer-core` package).",
        *(["", iface.doc] if iface.doc else []),
        "",
        "## How to call them",
        "",
        "```python",
        *snippet,
        "```",
        "",
        f'- `{client}.call("<function name>", *args, **kwargs)` runs the function with those arguments '
        "(positional and keyword, as in its signature below) and returns its result.",
        "- Arguments and results may be `None`, booleans, numbers, strings, bytes, lists, tuples "
        "(they arrive as lists), dicts, NumPy arrays and torch tensors; other objects cannot cross.",
        "- An error raised in the sandbox is raised here as `seer.rpc.RemoteError`; its `remote_type`, "
        "`message` and `traceback` say what went wrong.",
        f"- Endpoint: `{iface.url}`, token `{iface.token}`. `RpcClient` sends the token with every "
        "request; a request without it is refused.",
        f'- `{client}.invoke("<function name>", [args], {{kwargs}}, timeout=seconds)` does the same with '
        "the arguments as a list and a dict (for a parameter named `function`) and its own time limit "
        "(calls otherwise stop after 300 seconds).",
        f"- `{client}.functions()` lists the functions the server has.",
        "",
        "## Functions",
    ]
    if not iface.functions:
        lines += ["", "The interface exposes no functions."]
    for fn in iface.functions:
        lines += ["", f"### `{fn.name}`", "", "```python", f"{fn.signature()}", "```", ""]
        if fn.doc:
            lines += [fn.doc, ""]
        lines.append(f"Call: `{_example_call(client, fn)}`")
        remote = [p.name for p in fn.params if p.default is not None and not p.literal]
        if remote:
            lines.append(f"(Leave out {', '.join(f'`{n}`' for n in remote)} to use the sandbox's default.)")
    return "\n".join(lines) + "\n"


def prompt_text(served: Any) -> str:
    """Markdown for an agent's prompt: the functions, and how to call them with ``RpcClient``."""
    return _prompt(_check(served))


def _skill(iface: _Interface) -> Skill:
    names = [f.name for f in iface.functions]
    listed = ", ".join(names)
    description = (
        f"Call the `{iface.name}` Python functions ({listed}) that run in a remote seer sandbox, "
        f"through the client module {iface.name}.py in this skill's folder."
    )
    if len(description) > _MAX_DESCRIPTION:
        description = (
            f"Call the `{iface.name}` Python functions ({len(names)} of them) that run in a remote seer "
            f"sandbox, through the client module {iface.name}.py in this skill's folder."
        )
    example = ["import sys", "", 'sys.path.insert(0, "<this skill\'s folder>")', f"import {iface.name}"]
    if iface.functions:
        fn = iface.functions[0]
        example += ["", f"print({iface.name}.{fn.name}({', '.join(_example_args(fn))}))"]
    body = "\n".join(
        [
            f"# `{iface.name}`",
            "",
            f"These functions run in a remote sandbox (served from `{iface.file_name}`). "
            f"`{iface.name}.py`, next to this file, is a Python client for them: calling one of its "
            "functions runs it in the sandbox over RPC and returns its result.",
            "",
            "## Use",
            "",
            "Put this skill's folder (the one holding this `SKILL.md`) on `sys.path` and import the module:",
            "",
            "```python",
            *example,
            "```",
            "",
            "or run `PYTHONPATH=<this skill's folder> python your_script.py`. The client needs the "
            "`seer` package (`seer-core`) installed in that Python. An error raised in the sandbox is "
            "raised as `seer.rpc.RemoteError` (`remote_type`, `message`, `traceback`).",
            "",
            "## Functions",
            "",
            _docs(iface),
        ]
    )
    return Skill(iface.name, description, body, files={f"{iface.name}.py": _client_source(iface)})


# --- the modes -------------------------------------------------------------------------------
class LibraryMode(ExposeMode):
    """An importable module, ``<name>.py``, whose functions have the interface's signatures and
    docstrings and call the sandbox over RPC (one client per module, made on first use)."""

    name: ClassVar[str] = "library"
    description: ClassVar[str] = "importable Python module; each function calls the sandbox over RPC"

    def expose(self, served: Any) -> Library:
        iface = _check(served)
        return Library(iface.name, {f"{iface.name}.py": _client_source(iface)}, docs=_docs(iface))


class PromptMode(ExposeMode):
    """Markdown for an agent's prompt: each function's signature and docstring, and a ready-to-run
    snippet calling them with :class:`seer.rpc.RpcClient`."""

    name: ClassVar[str] = "prompt"
    description: ClassVar[str] = "Markdown for the agent's prompt: the functions and how to call them"

    def expose(self, served: Any) -> str:
        return _prompt(_check(served))


class SkillMode(ExposeMode):
    """An agent skill: ``SKILL.md`` (how to use the functions, their signatures and docstrings)
    and the ``library`` mode's client module beside it."""

    name: ClassVar[str] = "skill"
    description: ClassVar[str] = "agent skill: SKILL.md plus the client module"

    def expose(self, served: Any) -> Skill:
        return _skill(_check(served))


BUILTIN_EXPOSE_MODES: Sequence[type[ExposeMode]] = (LibraryMode, PromptMode, SkillMode)

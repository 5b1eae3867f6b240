"""What an interface file exposes, read from its source with :mod:`ast` (never imported).

:func:`inspect_interface` checks an interface file and describes its ``@expose`` functions as
:class:`FunctionSpec` objects: the client runs it before anything is uploaded, the RPC server
runs it again before loading the file, so both agree on what is served.

Rules an interface file must follow (each broken rule is reported with file and line):

* it parses;
* it has at least one module-level ``def`` (or ``async def``) decorated with a bare ``@expose``;
* ``@expose`` is used on module-level functions only (not on methods or nested functions) and
  not with arguments;
* an exposed function takes named parameters only: no ``*args`` and no ``**kwargs`` (RPC and
  MCP pass arguments by name, and a signature is what the agent is shown);
* no two exposed functions share a name.

Type hints are read as source text. The simple ones (``int``, ``float``, ``str``, ``bool``,
``None``, ``list[...]``, ``tuple[...]``, ``set[...]``, ``dict[...]``, ``Optional[...]``,
``X | Y``, ``Union[...]``, ``Literal[...]``, ``Any``, and their ``typing`` spellings) become a
JSON Schema for MCP (:attr:`FunctionSpec.input_schema`) and are checked by the server on every
call (a container's first :data:`CHECKED_ITEMS` items); any other hint (``torch.Tensor``, a
class of yours) is shown but not checked.

Standard library only: this module runs in the sandbox too.
"""

from __future__ import annotations

import ast
import itertools
import numbers
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from seer.errors import ConfigProblem, InterfaceError

__all__ = [
    "FunctionSpec",
    "ParamSpec",
    "TypeCheck",
    "inspect_interface",
    "parse_annotation",
]

#: How many items of a list, tuple, set or dict argument are checked against its hint (the
#: first ones): enough to catch a wrong type, without a Python loop over a million floats.
CHECKED_ITEMS = 10_000

#: ParamSpec.kind values, as :class:`inspect.Parameter` names them (lower case)
POSITIONAL_ONLY = "positional_only"
POSITIONAL_OR_KEYWORD = "positional_or_keyword"
VAR_POSITIONAL = "var_positional"
KEYWORD_ONLY = "keyword_only"
VAR_KEYWORD = "var_keyword"


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of an exposed function."""

    name: str
    #: ``positional_only``, ``positional_or_keyword``, ``var_positional``, ``keyword_only`` or
    #: ``var_keyword`` (the served file is refused for the two ``var_`` kinds)
    kind: str
    #: the annotation's source text (``"torch.Tensor"``), or None
    annotation: str | None = None
    #: the default's source text (``"10"``, ``"None"``, ``"'x'"``), or None when there is none
    default: str | None = None

    @property
    def required(self) -> bool:
        """Whether a call must pass this parameter (it has no default and is not ``*args``/``**kwargs``)."""
        return self.default is None and self.kind not in (VAR_POSITIONAL, VAR_KEYWORD)

    def to_dict(self) -> dict[str, Any]:
        """The parameter as a JSON-able dict (what ``GET /functions`` sends)."""
        return {"name": self.name, "kind": self.kind, "annotation": self.annotation, "default": self.default}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ParamSpec:
        """The parameter a :meth:`to_dict` dict describes."""
        return cls(data["name"], data["kind"], data.get("annotation"), data.get("default"))


@dataclass(frozen=True)
class FunctionSpec:
    """An exposed function as the agent sees it: name, parameters, docstring, signature."""

    name: str
    params: list[ParamSpec]
    #: the return annotation's source text, or None
    returns: str | None
    #: the docstring (cleaned up as :func:`inspect.cleandoc` does), or ""
    doc: str
    #: ``"(prompt: str, layer: int = 10) -> dict"``
    signature: str
    #: JSON Schema of the arguments (an object keyed by parameter name), for MCP tools
    input_schema: dict[str, Any] = field(default_factory=dict)
    #: the line of the ``def`` in the interface file
    line: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The function's spec as a JSON-able dict (what ``GET /functions`` sends)."""
        return {
            "name": self.name,
            "params": [p.to_dict() for p in self.params],
            "returns": self.returns,
            "doc": self.doc,
            "signature": self.signature,
            "input_schema": self.input_schema,
            "line": self.line,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FunctionSpec:
        """The spec a :meth:`to_dict` dict describes."""
        return cls(
            name=data["name"],
            params=[ParamSpec.from_dict(p) for p in data.get("params", [])],
            returns=data.get("returns"),
            doc=data.get("doc", ""),
            signature=data.get("signature", "()"),
            input_schema=dict(data.get("input_schema", {})),
            line=int(data.get("line", 0)),
        )

    def __str__(self) -> str:
        return f"{self.name}{self.signature}"


# --- annotations: one small type tree for the schema and the checks -------------------------
@dataclass(frozen=True)
class TypeCheck:
    """A type hint the server can check and describe: ``kind`` is one of ``any``, ``int``,
    ``float``, ``str``, ``bool``, ``none``, ``bytes``, ``list``, ``tuple``, ``set``, ``dict``,
    ``union``, ``literal``; ``args`` holds the element types (or the literal values)."""

    kind: str
    args: tuple[Any, ...] = ()
    text: str = ""

    # -- JSON Schema -------------------------------------------------------------------------
    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the values this check accepts (what MCP tools show)."""
        k = self.kind
        simple = {
            "int": "integer",
            "float": "number",
            "str": "string",
            "bool": "boolean",
            "none": "null",
        }
        if k in simple:
            return {"type": simple[k]}
        if k == "bytes":
            return {"type": "string", "contentEncoding": "base64"}
        if k in ("list", "tuple", "set"):
            out: dict[str, Any] = {"type": "array"}
            if self.args:
                out["items"] = self.args[0].schema()
            if k == "set":
                out["uniqueItems"] = True
            return out
        if k == "dict":
            out = {"type": "object"}
            if len(self.args) == 2 and self.args[1].kind != "any":
                out["additionalProperties"] = self.args[1].schema()
            return out
        if k == "union":
            options = [a.schema() for a in self.args]
            if any(not o for o in options):
                return {}
            return {"anyOf": options}
        if k == "literal":
            return {"enum": list(self.args)}
        return {"description": f"Python type: {self.text}"} if self.text else {}

    # -- checking ----------------------------------------------------------------------------
    def problem(self, value: Any, where: str) -> str | None:
        """Why ``value`` does not fit (naming ``where``), or None."""
        k = self.kind
        if k == "any":
            return None
        ok: bool
        if k == "int":
            ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        elif k == "float":
            ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        elif k == "str":
            ok = isinstance(value, str)
        elif k == "bool":
            ok = isinstance(value, bool) or type(value).__name__ == "bool_"
        elif k == "none":
            ok = value is None
        elif k == "bytes":
            ok = isinstance(value, bytes | bytearray | memoryview)
        elif k in ("list", "tuple", "set"):
            if not isinstance(value, list | tuple | set | frozenset):
                return _mismatch(where, self, value)
            if self.args:
                item = self.args[0]
                for i, element in enumerate(itertools.islice(value, CHECKED_ITEMS)):
                    problem = item.problem(element, f"{where}[{i}]")
                    if problem:
                        return problem
            return None
        elif k == "dict":
            if not isinstance(value, dict):
                return _mismatch(where, self, value)
            if len(self.args) == 2:
                key_t, value_t = self.args
                for key, element in itertools.islice(value.items(), CHECKED_ITEMS):
                    problem = key_t.problem(key, f"{where} key {key!r}"[:200]) or value_t.problem(
                        element, f"{where}[{key!r}]"[:200]
                    )
                    if problem:
                        return problem
            return None
        elif k == "union":
            if any(option.problem(value, where) is None for option in self.args):
                return None
            return _mismatch(where, self, value)
        elif k == "literal":
            if any(value == option and type(value) is type(option) for option in self.args):
                return None
            return f"{where} must be one of {', '.join(repr(a) for a in self.args)}"
        else:
            return None
        return None if ok else _mismatch(where, self, value)

    def coerce(self, value: Any) -> Any:
        """Give a tuple- or set-typed parameter the container it asked for (the wire carries
        both as lists)."""
        if self.kind == "tuple" and isinstance(value, list):
            return tuple(value)
        if self.kind == "set" and isinstance(value, list | tuple):
            return set(value)
        if self.kind == "union" and value is not None:
            for option in self.args:
                if option.kind != "none" and option.problem(value, "") is None:
                    return option.coerce(value)
        return value


def _mismatch(where: str, expected: TypeCheck, value: Any) -> str:
    return f"{where} must be {expected.text or expected.kind}, got {type(value).__name__}"


_ANY = TypeCheck("any")
_NAMES = {
    "int": "int",
    "float": "float",
    "str": "str",
    "bool": "bool",
    "bytes": "bytes",
    "None": "none",
    "NoneType": "none",
    "list": "list",
    "List": "list",
    "Sequence": "list",
    "MutableSequence": "list",
    "Iterable": "list",
    "tuple": "tuple",
    "Tuple": "tuple",
    "set": "set",
    "Set": "set",
    "frozenset": "set",
    "FrozenSet": "set",
    "AbstractSet": "set",
    "dict": "dict",
    "Dict": "dict",
    "Mapping": "dict",
    "MutableMapping": "dict",
    "Any": "any",
    "object": "any",
}


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _from_node(node: ast.expr) -> TypeCheck:
    text = ast.unparse(node)
    if isinstance(node, ast.Constant):
        if node.value is None:
            return TypeCheck("none", text="None")
        if isinstance(node.value, str):  # a forward reference: "torch.Tensor"
            return parse_annotation(node.value)
        return TypeCheck("any", text=text)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([_from_node(node.left), _from_node(node.right)], text)
    if isinstance(node, ast.Subscript):
        base = _last_name(node.value)
        items = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base == "Optional" and len(items) == 1:
            return _union([_from_node(items[0]), TypeCheck("none", text="None")], text)
        if base == "Union":
            return _union([_from_node(i) for i in items], text)
        if base == "Literal":
            values = []
            for item in items:
                if not isinstance(item, ast.Constant):
                    return TypeCheck("any", text=text)
                values.append(item.value)
            return TypeCheck("literal", tuple(values), text)
        if base == "Annotated" and items:
            return _from_node(items[0])
        kind = _NAMES.get(base or "")
        if kind in ("list", "set"):
            return TypeCheck(kind, (_from_node(items[0]),), text)
        if kind == "tuple":
            # tuple[int, ...] checks each item; tuple[int, str] is checked as a sequence only
            if len(items) == 2 and isinstance(items[1], ast.Constant) and items[1].value is Ellipsis:
                return TypeCheck("tuple", (_from_node(items[0]),), text)
            return TypeCheck("tuple", (), text)
        if kind == "dict" and len(items) == 2:
            return TypeCheck("dict", (_from_node(items[0]), _from_node(items[1])), text)
        return TypeCheck("any", text=text)
    name = _last_name(node)
    if name is not None and name in _NAMES:
        if isinstance(node, ast.Attribute) and not (
            isinstance(node.value, ast.Name) and node.value.id in ("typing", "t", "collections", "abc")
        ):
            return TypeCheck("any", text=text)  # np.float32, torch.Tensor, ...: shown, not checked
        return TypeCheck(_NAMES[name], text=text)
    return TypeCheck("any", text=text)


def _union(options: list[TypeCheck], text: str) -> TypeCheck:
    flat: list[TypeCheck] = []
    for option in options:
        flat.extend(option.args if option.kind == "union" else (option,))
    if any(o.kind == "any" for o in flat):
        return TypeCheck("any", text=text)
    return TypeCheck("union", tuple(flat), text)


def parse_annotation(text: str | None) -> TypeCheck:
    """The :class:`TypeCheck` of an annotation's source text (``any`` when None or unreadable)."""
    if not text:
        return _ANY
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return TypeCheck("any", text=text)
    return _from_node(node)


def input_schema(params: list[ParamSpec]) -> dict[str, Any]:
    """The JSON Schema (an object) of a function's arguments, from its parameters' hints."""
    properties: dict[str, Any] = {}
    required = []
    for p in params:
        if p.kind in (VAR_POSITIONAL, VAR_KEYWORD):
            continue
        schema = dict(parse_annotation(p.annotation).schema())
        if p.default is not None:
            try:
                schema["default"] = ast.literal_eval(p.default)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                pass
        else:
            required.append(p.name)
        properties[p.name] = schema
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


# --- reading an interface file ----------------------------------------------------------------
def _is_expose(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Name) and target.id == "expose"


def _params(args: ast.arguments) -> list[ParamSpec]:
    out = []
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        kind = POSITIONAL_ONLY if i < len(args.posonlyargs) else POSITIONAL_OR_KEYWORD
        out.append(_param(arg, kind, default))
    if args.vararg is not None:
        out.append(_param(args.vararg, VAR_POSITIONAL, None))
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append(_param(arg, KEYWORD_ONLY, kw_default))
    if args.kwarg is not None:
        out.append(_param(args.kwarg, VAR_KEYWORD, None))
    return out


def _param(arg: ast.arg, kind: str, default: ast.expr | None) -> ParamSpec:
    return ParamSpec(
        name=arg.arg,
        kind=kind,
        annotation=ast.unparse(arg.annotation) if arg.annotation is not None else None,
        default=ast.unparse(default) if default is not None else None,
    )


def format_signature(params: list[ParamSpec], returns: str | None) -> str:
    """``(prompt: str, layer: int = 10) -> dict``, as :func:`inspect.signature` prints it."""
    parts: list[str] = []
    star_done = False
    for i, p in enumerate(params):
        if p.kind == KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if p.kind == VAR_POSITIONAL:
            star_done = True
        prefix = "*" if p.kind == VAR_POSITIONAL else "**" if p.kind == VAR_KEYWORD else ""
        text = prefix + p.name
        if p.annotation is not None:
            text += f": {p.annotation}"
        if p.default is not None:
            text += f" = {p.default}" if p.annotation is not None else f"={p.default}"
        parts.append(text)
        nxt = params[i + 1] if i + 1 < len(params) else None
        if p.kind == POSITIONAL_ONLY and (nxt is None or nxt.kind != POSITIONAL_ONLY):
            parts.append("/")
    sig = f"({', '.join(parts)})"
    return sig + (f" -> {returns}" if returns is not None else "")


@dataclass(frozen=True)
class InterfaceInfo:
    """What :func:`inspect_interface` found: the exposed functions and the module docstring."""

    functions: list[FunctionSpec]
    doc: str = ""


def inspect_interface(source: str | bytes, filename: str) -> InterfaceInfo:
    """Check an interface file's source and describe its exposed functions.

    Raises :class:`~seer.errors.InterfaceError` listing every problem (file and line each).
    """
    problems: list[ConfigProblem] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning for "\d": not ours to report
            tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise InterfaceError(
            [ConfigProblem("syntax", f"{exc.msg}", file=filename, line=exc.lineno)]
        ) from None
    except ValueError as exc:  # null bytes
        raise InterfaceError([ConfigProblem("syntax", f"cannot be parsed: {exc}", file=filename)]) from None

    top_level = set()
    functions: list[FunctionSpec] = []
    seen: dict[str, int] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        exposing = [d for d in node.decorator_list if _is_expose(d)]
        if not exposing:
            continue
        top_level.add(id(node))
        where = f"@expose {node.name}"
        if any(isinstance(d, ast.Call) for d in exposing):
            problems.append(
                ConfigProblem(where, "use @expose without arguments", file=filename, line=node.lineno)
            )
            continue
        params = _params(node.args)
        for p in params:
            if p.kind in (VAR_POSITIONAL, VAR_KEYWORD):
                star = "*" if p.kind == VAR_POSITIONAL else "**"
                problems.append(
                    ConfigProblem(
                        where,
                        f"{star}{p.name} is not supported: exposed functions are called with named "
                        "parameters over RPC and MCP; list the parameters explicitly",
                        file=filename,
                        line=node.lineno,
                    )
                )
        if node.name in seen:
            problems.append(
                ConfigProblem(
                    where,
                    f"a function named {node.name!r} is already exposed at line {seen[node.name]}",
                    file=filename,
                    line=node.lineno,
                )
            )
            continue
        seen[node.name] = node.lineno
        returns = ast.unparse(node.returns) if node.returns is not None else None
        functions.append(
            FunctionSpec(
                name=node.name,
                params=params,
                returns=returns,
                doc=ast.get_docstring(node) or "",
                signature=format_signature(params, returns),
                input_schema=input_schema(params),
                line=node.lineno,
            )
        )
    for inner in ast.walk(tree):
        if (
            isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and id(inner) not in top_level
            and any(_is_expose(d) for d in inner.decorator_list)
        ):
            what = "a class" if isinstance(inner, ast.ClassDef) else "a method or nested function"
            problems.append(
                ConfigProblem(
                    f"@expose {inner.name}",
                    f"@expose is for module-level functions; {inner.name!r} is {what}",
                    file=filename,
                    line=inner.lineno,
                )
            )
    if not functions and not problems:
        problems.append(
            ConfigProblem(
                "@expose",
                "no function is exposed: decorate the module-level functions to serve with @expose",
                file=filename,
                line=1,
            )
        )
    if problems:
        problems.sort(key=lambda p: p.line or 0)
        raise InterfaceError(problems)
    return InterfaceInfo(functions, ast.get_docstring(tree) or "")

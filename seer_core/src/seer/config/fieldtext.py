"""Pydantic fields as text, for the documents generated from config models (docs/config.md and
seer's SKILL.md): one reading of types and defaults, each document choosing its own wording."""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any


def _or(parts: Sequence[str]) -> str:
    return " or ".join(parts)


def type_text(tp: Any, *, union: Callable[[Sequence[str]], str] = _or) -> str:
    """``list[ModelConfig]``, ``str or None``: a type as a person writes it; ``union`` joins the
    members of a union (default: ``a or b``)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return type_text(args[0], union=union)
    if origin in (typing.Union, types.UnionType):
        return union([type_text(a, union=union) for a in args])
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_text(a, union=union) for a in args)}]" if args else name
    if tp is type(None):
        return "None"
    if tp is typing.Any:
        return "Any"
    return getattr(tp, "__name__", str(tp))


def default_text(field: Any, *, required: str = "required") -> str:
    """A field's default as a code span (enums by value), or ``required`` when it has none."""
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return required
    else:
        value = field.default
    if isinstance(value, enum.Enum):
        value = value.value
    return f"`{value!r}`"

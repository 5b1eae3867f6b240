"""The base of every config model, and how pydantic's errors become :class:`ConfigProblem` s.

Every config class derives from :class:`StrictModel`: unknown fields are errors (with the field
seer calls it, where people carry a name over from another tool), no string may hold a NUL byte,
assignment is validated too, and a failure is one :class:`~seer.errors.ConfigError` naming each
field by its full path (``models[1].base_model``), raised by the outermost config object only.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn, get_args

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from seer.errors import ConfigError, ConfigProblem

__all__ = ["ConfigSource", "StrictModel", "fail_at", "format_loc", "problems_from"]

#: Field names people carry over from other tools (or older seer), and what seer calls them.
_ALIASES: dict[str, tuple[str, ...]] = {
    "gpu_type": ("gpu",),
    "gpus": ("gpu_count",),
    "num_gpus": ("gpu_count",),
    "github_repos": ("repos",),
    "repositories": ("repos",),
    "packages": ("python_packages",),
    "pip_packages": ("python_packages",),
    "requirements": ("python_packages",),
    "apt_packages": ("system_packages",),
    "mode": ("execution_mode",),
    "model": ("models",),
    "branch": ("ref", "revision"),
    "tag": ("ref", "revision"),
    "commit": ("ref", "revision"),
    "model_name": ("name",),
    "repo": ("url",),
    "peft": ("is_peft",),
    "adapter": ("is_peft",),
    "variable": ("var_name",),
    "torch_dtype": ("dtype",),
    "device_map": ("device",),
}


@dataclass(frozen=True)
class ConfigSource:
    """Where a config was read from (:func:`seer.load_config` records it on the config), so a
    problem found later, at preflight, names the file and line as one found while loading does."""

    file: str
    #: A field as validated (``models[1].name``) -> the name the file gave it and its line.
    place: Callable[[str], tuple[str, int | None]]

    def locate(self, problems: Sequence[ConfigProblem]) -> list[ConfigProblem]:
        """``problems``, each naming this file and its line (one that names a place already keeps it)."""
        out = []
        for p in problems:
            if p.file is None:
                field, line = self.place(p.field)
                p = ConfigProblem(field, p.message, file=self.file, line=line)
            out.append(p)
        return out


def format_loc(loc: tuple[int | str, ...]) -> str:
    """``("models", 0, "base_model")`` -> ``"models[0].base_model"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


# --- turning pydantic errors into ConfigProblems ---------------------------------------------
def fail_at(*errors: tuple[tuple[int | str, ...], str, Any]) -> NoReturn:
    """Raise a validation error at explicit locations (relative to the value being validated).

    Used by validators that know which nested field is at fault, so the problem names
    ``models[1].base_model`` rather than the model as a whole.
    """
    raise ValidationError.from_exception_data(
        "SandboxConfig",
        [
            InitErrorDetails(type=PydanticCustomError("seer_config", message), loc=loc, input=value)
            for loc, message, value in errors
        ],
    )


def _model_at(root: type[BaseModel] | None, loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The config class that holds the field at ``loc`` (e.g. ``("models", 0)`` -> ModelConfig)."""

    def inner(tp: Any) -> type[BaseModel] | None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp
        for arg in get_args(tp):
            found = inner(arg)
            if found is not None:
                return found
        return None

    cls = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = cls.model_fields.get(part) if cls is not None else None
        if field is None:
            return None
        cls = inner(field.annotation)
    return cls


def _unknown_field_message(name: str, owner: type[BaseModel] | None) -> str:
    if owner is None:
        return "unknown field (check the spelling)"
    fields = list(owner.model_fields)
    listing = f"{owner.__name__} fields: {', '.join(fields)}"
    why = owner.absent_fields.get(name) if issubclass(owner, StrictModel) else None
    if why:
        return f"{owner.__name__} has no {name!r}: {why}; {listing}"
    suggestion = next((a for a in _ALIASES.get(name, ()) if a in fields), None)
    if suggestion is None:
        close = difflib.get_close_matches(name.lower(), fields, n=1, cutoff=0.6)
        suggestion = close[0] if close else None
    hint = f" (did you mean {suggestion!r}?)" if suggestion else ""
    return f"unknown field{hint}; {listing}"


def problems_from(
    exc: ValidationError, prefix: tuple[int | str, ...] = (), model: type[BaseModel] | None = None
) -> list[ConfigProblem]:
    """One :class:`ConfigProblem` per pydantic error, located by the full dotted field path.

    ``prefix`` is where the validated value sits in the config (a provider validating
    ``provider_options`` passes ``("provider_options",)``); ``model`` is the config class that was
    validated, so an unknown field's message can list the fields it has."""
    problems = []
    for err in exc.errors(include_url=False):
        # Drop pydantic's internal tags (e.g. "function-after[...]") from the location.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        msg = err["msg"]
        for lead in ("Value error, ", "Assertion failed, "):
            msg = msg.removeprefix(lead)
        if err["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
            msg = _unknown_field_message(loc[-1], _model_at(model, loc[:-1]))
        elif err["type"] == "missing":
            msg = "required field is missing"
        problems.append(ConfigProblem(field=format_loc(prefix + loc), message=msg))
    return problems


_depth: ContextVar[int] = ContextVar("seer_config_depth", default=0)


@contextmanager
def _validating(cls: type[BaseModel]) -> Iterator[None]:
    """Turn a ValidationError into a ConfigError, but only at the outermost config object.

    pydantic builds nested configs through their ``__init__``; there the ValidationError must
    pass through untouched so pydantic can prefix its location (``models[0]`` + ``base_model``).
    """
    depth = _depth.get()
    token = _depth.set(depth + 1)
    try:
        yield
    except ValidationError as exc:
        if depth:
            raise
        raise ConfigError(problems_from(exc, model=cls), title=f"Invalid {cls.__name__}") from None
    finally:
        _depth.reset(token)


class StrictModel(BaseModel):
    """Base of every config model: unknown fields are errors, errors are ConfigError."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, use_enum_values=False)
    #: Fields a class deliberately does not have, and why: the message for one given anyway.
    absent_fields: ClassVar[Mapping[str, str]] = {}

    def __init__(self, **data: Any) -> None:
        with _validating(type(self)):
            super().__init__(**data)

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul_bytes(cls, value: Any) -> Any:
        """Refuse a NUL byte in any string, for every field: such a string cannot reach a
        process's argv or environment (the OS refuses it) and would fail only once the sandbox runs."""
        errors = list(_nul_bytes(value))
        if errors:
            fail_at(*errors)
        return value

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Any:
        with _validating(cls):
            return super().model_validate(obj, **kwargs)

    @classmethod
    def model_validate_json(cls, json_data: Any, **kwargs: Any) -> Any:
        with _validating(cls):
            return super().model_validate_json(json_data, **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        with _validating(type(self)):
            super().__setattr__(name, value)


_NUL_MESSAGE = "contains a NUL byte (\\x00), which no command argument, path or environment variable can hold"


def _nul_bytes(
    value: Any, loc: tuple[int | str, ...] = ()
) -> Iterator[tuple[tuple[int | str, ...], str, Any]]:
    """``(location, message, value)`` for each string with a NUL byte in a raw field value, looking
    into lists, tuples and mappings (keys too: an ``env`` name is a key). Config objects already
    built were checked when they were."""
    stack: list[tuple[tuple[int | str, ...], Any]] = [(loc, value)]
    seen: set[int] = set()  # a self-containing list or dict is walked once
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                yield where, _NUL_MESSAGE, item
        elif isinstance(item, dict | list | tuple) and id(item) not in seen:
            seen.add(id(item))
            if isinstance(item, dict):
                for key, sub in reversed(item.items()):
                    if isinstance(key, str) and "\x00" in key:
                        yield where, f"the name {key!r} {_NUL_MESSAGE}", key
                    else:
                        stack.append(((*where, key), sub))
            else:
                stack.extend(reversed([((*where, i), sub) for i, sub in enumerate(item)]))

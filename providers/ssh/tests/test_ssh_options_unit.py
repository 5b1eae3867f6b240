"""The remote Python option (``provider_options.python``) of seer-ssh and of seer-runpod, which
checks it with seer-ssh's :func:`~seer_ssh.options.check_interpreter`: it reaches a remote shell,
so only a name or a path passes."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from seer_ssh.options import SshOptions

pytestmark = pytest.mark.unit


def _options() -> list[tuple[type[BaseModel], dict[str, Any]]]:
    found: list[tuple[type[BaseModel], dict[str, Any]]] = [(SshOptions, {"host": "127.0.0.1"})]
    try:
        from seer_runpod.options import RunPodOptions
    except ImportError:  # the provider matrix runs seer-ssh's tests without seer-runpod
        return found
    return [*found, (RunPodOptions, {})]


@pytest.mark.parametrize("model, required", _options(), ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("python", ["python3", "/opt/conda/bin/python3.12", "py"])
def test_a_name_or_a_path_is_the_remote_python(
    model: type[BaseModel], required: dict[str, Any], python: str
) -> None:
    assert model.model_validate({**required, "python": python}).python == python  # type: ignore[attr-defined]


@pytest.mark.parametrize("model, required", _options(), ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("python", ["", "python3 -c 'import os'", "-c", "python3\n", "py thon"])
def test_anything_else_is_refused_naming_it(
    model: type[BaseModel], required: dict[str, Any], python: str
) -> None:
    with pytest.raises(ValidationError, match="is not an interpreter name or path") as info:
        model.model_validate({**required, "python": python})
    assert repr(python) in str(info.value)

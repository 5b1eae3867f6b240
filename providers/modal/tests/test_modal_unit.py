"""Fast unit tests of seer-modal, with the modal SDK mocked at its boundary (no fake, no engine).

The mocks carry the real methods' signatures: ``mock.patch(..., autospec=True)`` alone does not
catch a keyword typo on modal's synchronicity wrappers (their ``__call__`` takes ``*args,
**kwargs``), so :func:`signed` binds every call against ``inspect.signature`` of the real method.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import modal
import pytest
from seer.config import SandboxConfig
from seer.errors import InvalidSandboxIdError
from seer.providers.base import MachineSpec
from seer_modal import credentials, provider
from seer_modal.gpus import MODAL_GPUS, modal_gpu
from seer_modal.options import ModalOptions
from seer_modal.provider import LEDGER, ModalProvider
from seer_modal.tunnels import pick_tunnel_ports, tunnel_url

pytestmark = pytest.mark.unit

#: The image ``modal.Image.from_id`` gives in these tests.
KNOWN = SimpleNamespace(object_id="im-built")


def signed(real: Callable[..., Any], result: Any = None) -> mock.MagicMock:
    """A mock that raises TypeError, as the real method would, for arguments its signature does
    not accept, and records the calls it does."""
    signature = inspect.signature(real)
    params = list(signature.parameters.values())
    if params and params[0].name == "cls":  # a wrapped classmethod shows its cls: called on the class
        signature = signature.replace(parameters=params[1:])

    def check(*args: Any, **kwargs: Any) -> Any:
        signature.bind(*args, **kwargs)
        return result

    return mock.MagicMock(side_effect=check)


def test_signed_mocks_catch_what_autospec_does_not() -> None:
    with mock.patch.object(modal.Sandbox, "create", autospec=True) as auto:
        modal.Sandbox.create(app=None, timout=5)  # the typo passes autospec
    assert auto.called
    checked = signed(modal.Sandbox.create)
    with pytest.raises(TypeError, match="timout"):
        checked(app=None, timout=5)


@pytest.fixture
def sdk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, mock.MagicMock]:
    """Every SDK call ``create`` makes, mocked with the real signatures; credentials present."""
    monkeypatch.setenv("SEER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-unit")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-unit")
    sandbox = mock.MagicMock(object_id="sb-" + "a" * 22)
    image = mock.MagicMock(name="image", object_id="im-built")
    mocks = {
        "lookup": signed(modal.App.lookup, mock.MagicMock(app_id="ap-unit")),
        "create": signed(modal.Sandbox.create, sandbox),
        "from_name": signed(modal.Volume.from_name, "volume"),
        "from_dict": signed(modal.Secret.from_dict, "secret"),
        "image": image,
        "from_id": signed(modal.Image.from_id, KNOWN),
    }
    monkeypatch.setattr(modal.App, "lookup", mocks["lookup"])
    monkeypatch.setattr(modal.Sandbox, "create", mocks["create"])
    monkeypatch.setattr(modal.Volume, "from_name", mocks["from_name"])
    monkeypatch.setattr(modal.Secret, "from_dict", mocks["from_dict"])
    monkeypatch.setattr(modal.Image, "from_id", mocks["from_id"])
    monkeypatch.setattr(provider, "sandbox_image", lambda spec, options, wheel=None: image)
    monkeypatch.setattr(provider, "_apps", {})
    monkeypatch.setattr(provider, "_resolved", {})
    monkeypatch.setattr(LEDGER, "_watch", lambda sandbox_id: None)  # no starter watch process
    return mocks


def _spec(**changes: Any) -> MachineSpec:
    data: dict[str, Any] = {
        "name": "unit",
        "timeout": 1200,
        "env": {"PLAIN": "1"},
        "secrets": {"TOKEN": "s3cret"},
        "labels": {"seer.name": "unit"},
        "options": ModalOptions(app_name="unit-app", model_volume="unit-models", tunnel_ports=3),
    }
    data.update(changes)
    return MachineSpec(**data)


def test_create_asks_modal_for_what_the_spec_says(sdk: dict[str, mock.MagicMock]) -> None:
    machine = ModalProvider().create(_spec(gpu="H100", gpu_count=2))
    assert machine.id == "modal-sb-" + "a" * 22
    sdk["lookup"].assert_called_once_with("unit-app", create_if_missing=True)
    sdk["from_name"].assert_called_once_with("unit-models", create_if_missing=True)
    (env,), _ = sdk["from_dict"].call_args
    assert env == {"PLAIN": "1", "SEER_WORKDIR": "/workspace", "TOKEN": "s3cret"}
    kwargs = sdk["create"].call_args.kwargs
    assert kwargs["gpu"] == "H100:2" and kwargs["timeout"] == 1200 and kwargs["image"] is sdk["image"]
    assert kwargs["secrets"] == ["secret"] and kwargs["volumes"] == {"/opt/seer/hf-hub": "volume"}
    tags = kwargs["tags"]
    assert tags["seer.managed"] == "sandbox" and tags["seer.name"] == "unit"
    assert [int(p) for p in tags["seer.tunnels"].split(",")] == kwargs["encrypted_ports"]
    assert len(kwargs["encrypted_ports"]) == 3
    assert "s3cret" not in repr(tags)


def test_a_built_image_is_named_by_id_next_time(sdk: dict[str, mock.MagicMock]) -> None:
    ModalProvider().create(_spec())
    assert sdk["create"].call_args.kwargs["image"] is sdk["image"]  # the layers, resolved by Modal
    sdk["from_id"].assert_not_called()
    ModalProvider().create(_spec())  # the same process: the image it resolved, no call at all
    sdk["from_id"].assert_not_called()
    assert sdk["create"].call_args.kwargs["image"] is sdk["image"]
    provider._forget_resolved()  # as a new process
    ModalProvider().create(_spec())
    sdk["from_id"].assert_called_once_with("im-built")  # one call instead of one per layer
    assert sdk["create"].call_args.kwargs["image"] is KNOWN
    provider._forget_resolved()
    # an id Modal no longer knows is forgotten, and the layers are resolved again
    made = sdk["create"].side_effect

    def gone_once(*args: Any, **kwargs: Any) -> Any:
        sdk["create"].side_effect = made
        raise modal.exception.NotFoundError("image im-built not found")

    sdk["create"].side_effect = gone_once
    ModalProvider().create(_spec())
    assert sdk["create"].call_args.kwargs["image"] is sdk["image"]


def test_hidden_models_get_no_shared_volume(sdk: dict[str, mock.MagicMock]) -> None:
    ModalProvider().create(_spec(private_model_cache=True))
    assert sdk["create"].call_args.kwargs["volumes"] == {}
    sdk["from_name"].assert_not_called()


def test_a_failed_create_leaves_no_record(sdk: dict[str, mock.MagicMock]) -> None:
    sdk["create"].side_effect = modal.exception.InvalidError("no such region")
    with pytest.raises(Exception, match="could not create the Modal sandbox: InvalidError: no such region"):
        ModalProvider().create(_spec())
    assert list(LEDGER.dir.glob("*.json")) == []


def test_gpu_names_map_to_modals() -> None:
    assert modal_gpu(None) is None
    assert modal_gpu("A100") == "A100-40GB"  # seer's A100 is the 40 GB one
    assert modal_gpu("A100-80GB", 4) == "A100-80GB:4"
    assert set(ModalProvider.capabilities.gpu_types) == set(MODAL_GPUS) >= {"H200", "L40S", "B200", "T4"}


def test_check_config_refuses_counts_and_lifetimes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-unit")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-unit")

    def fields(**config: Any) -> list[str]:
        return [p.field for p in ModalProvider.check_config(SandboxConfig(provider="modal", **config))]

    assert fields(gpu="H200", gpu_count=8) == []
    assert fields(gpu="T4", gpu_count=9) == ["gpu_count"]
    assert fields(gpu="A10G", gpu_count=5) == ["gpu_count"]
    assert fields(timeout=24 * 3600) == []
    assert fields(timeout=24 * 3600 + 1) == ["timeout"]
    assert fields(provider_options={"app_name": "bad name"}) == ["provider_options.app_name"]


@pytest.mark.parametrize(
    "pip_options",
    [
        "--find-links x; touch /pwn",
        "--find-links x && touch /pwn",
        "--pre $(touch /pwn)",
        "--pre `id`",
        "six",
    ],
)
def test_pip_options_holding_shell_or_packages_are_refused(pip_options: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as err:
        ModalOptions(pip_options=pip_options)
    assert "pip_options" in str(err.value)


def test_pip_options_are_options_and_their_values() -> None:
    options = "--find-links /opt/wheels --extra-index-url file:///opt/pypi/simple --pre --index-url=https://x.test/s"
    assert ModalOptions(pip_options=options).pip_options == options


@pytest.mark.parametrize(
    ("env", "toml", "problem"),
    [
        ({"MODAL_TOKEN_ID": "a", "MODAL_TOKEN_SECRET": "b"}, None, None),
        ({}, '[default]\ntoken_id = "a"\ntoken_secret = "b"\n', None),
        ({}, '[x]\ntoken_id = "a"\n[y]\ntoken_id = "c"\ntoken_secret = "d"\nactive = true\n', None),
        (
            {"MODAL_PROFILE": "x"},
            '[x]\ntoken_id = "a"\n[y]\ntoken_id = "c"\ntoken_secret = "d"\n',
            "no Modal",
        ),
        ({}, None, "no Modal credentials found"),
        ({"MODAL_TOKEN_ID": "a"}, None, "MODAL_TOKEN_SECRET is not"),
    ],
)
def test_credentials_found_as_the_sdk_finds_them(
    env: dict[str, str],
    toml: str | None,
    problem: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "modal.toml"
    if toml is not None:
        path.write_text(toml)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(path))
    found = credentials.credentials_problem()
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found and "modal token new" in found


def test_ids_are_checked_before_anything() -> None:
    for bad in ("../modal-sb-aaaaaaaaaaaaaaaaaaaaaa", "modal-sb-short", "sb-aaaaaaaaaaaaaaaaaaaaaa"):
        with pytest.raises(InvalidSandboxIdError):
            ModalProvider().attach(bad)
        with pytest.raises(InvalidSandboxIdError):
            ModalProvider().terminate(bad)


def test_tunnel_urls_and_ports() -> None:
    assert tunnel_url("abc.modal.host", 443) == "https://abc.modal.host"
    assert tunnel_url("r3.modal.host", 41234) == "https://r3.modal.host:41234"
    assert tunnel_url("127.0.0.1", 23456) == "http://127.0.0.1:23456"  # the fake's: plain HTTP
    ports = pick_tunnel_ports(6)
    assert len(set(ports)) == 6 and all(20000 <= p < 32000 for p in ports)


@pytest.mark.e2e  # a fresh interpreter: a subprocess
def test_importing_the_entry_point_does_not_import_modal() -> None:
    import subprocess
    import sys

    code = "import sys, seer_modal.plugin, seer_modal.provider; print('modal' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == "False\n"


def test_the_test_kit_without_docker_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake's sandboxes are containers: without the docker package (seer-modal[testing]) the
    kit names the extra, and the suites skip with that reason."""
    from seer_modal.testing.engine import docker_client, engine_problem

    monkeypatch.setitem(sys.modules, "docker", None)  # import docker -> ModuleNotFoundError
    with pytest.raises(ImportError, match=r'pip install "seer-modal\[testing\]"'):
        docker_client()
    assert 'pip install "seer-modal[testing]"' in (engine_problem("any-image") or "")


def test_objects_resolved_against_another_modal_server_are_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Apps and images this process resolved belong to the server they came from: once it talks
    to another server (or workspace), they are dropped, not called through (a full benchmark run
    met the SDK calling a stopped fake's address through an image resolved from it)."""
    monkeypatch.setenv("MODAL_SERVER_URL", "http://127.0.0.1:1")
    provider._same_server()
    provider._keep_resolved("image", "im-1", mock.MagicMock(object_id="im-1"))
    provider._apps["seer"] = object()
    provider._same_server()  # the same server: kept
    assert ("image", "im-1") in provider._resolved and "seer" in provider._apps
    monkeypatch.setenv("MODAL_SERVER_URL", "http://127.0.0.1:2")
    provider._same_server()
    assert not provider._resolved and not provider._apps

"""Which ``python_packages`` the client already has (``seer.providers.local.env.unsatisfied``)."""

from __future__ import annotations

from importlib import metadata

import pytest
from seer.providers.local import env as local_env
from seer.providers.local.env import unsatisfied

pytestmark = pytest.mark.unit


def test_no_packages_lists_no_installed_distributions(monkeypatch: pytest.MonkeyPatch) -> None:
    def listing() -> None:
        raise AssertionError("listed every installed distribution")

    monkeypatch.setattr(local_env.metadata, "distributions", listing)
    assert unsatisfied([]) == []
    # Named packages are looked up one by one, never by listing them all either.
    assert unsatisfied(["pytest"]) == []


def test_names_are_matched_as_pip_matches_them() -> None:
    version = metadata.version("huggingface-hub")
    assert unsatisfied(["Huggingface_Hub", f"huggingface.hub=={version}", "PyTest>=1"]) == []


def test_what_is_missing_or_the_wrong_version_is_returned_as_given() -> None:
    wanted = ["no-such-package-seer-test", "pytest<1", "pytest", "git+https://example.invalid/x.git"]
    assert unsatisfied(wanted) == [
        "no-such-package-seer-test",
        "pytest<1",
        "git+https://example.invalid/x.git",
    ]


def test_a_requirement_whose_marker_does_not_apply_is_skipped() -> None:
    assert unsatisfied(['no-such-package-seer-test; python_version < "3"']) == []


# --- offline and python="system" (seer.providers.local.env.python_problem) -------------------
MISSING = "no-such-package-seer-test>=1"


@pytest.mark.parametrize("name", ["SEER_OFFLINE", "PIP_NO_INDEX", "UV_OFFLINE", "UV_NO_INDEX"])
@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_each_offline_signal_is_read(name: str, value: str) -> None:
    assert local_env.index_unreachable({name: value}) == f"${name} is set"


@pytest.mark.parametrize("value", ["", "0", "false", "no", "off"])
def test_an_offline_signal_set_false_is_not_offline(value: str) -> None:
    assert local_env.index_unreachable({"SEER_OFFLINE": value, "PIP_NO_INDEX": value}) is None


def test_online_a_missing_package_is_left_to_the_installer() -> None:
    assert local_env.python_problem([MISSING, "pytest"], "auto", {}) is None


def test_offline_a_missing_package_is_refused_by_name() -> None:
    why = local_env.python_problem([MISSING, "pytest"], "auto", {"SEER_OFFLINE": "1"})
    assert why is not None
    assert MISSING in why and "pytest" not in why.split("lacks:")[1]
    assert "$SEER_OFFLINE is set" in why and "PIP_FIND_LINKS" in why


def test_offline_with_a_folder_of_wheels_the_installer_may_still_serve() -> None:
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/somewhere/wheels"}
    assert local_env.python_problem([MISSING], "auto", env) is None


def test_offline_what_the_client_has_needs_no_index() -> None:
    assert local_env.python_problem(["pytest", "packaging"], "auto", {"SEER_OFFLINE": "1"}) is None


def test_system_python_refuses_what_it_lacks_even_online() -> None:
    why = local_env.python_problem([MISSING, "pytest"], "system", {"PIP_FIND_LINKS": "/wheels"})
    assert why is not None and MISSING in why and "python='system'" in why
    assert local_env.python_problem(["pytest"], "system", {}) is None

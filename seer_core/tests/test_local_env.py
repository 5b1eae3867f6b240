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

"""The conformance suite's guard: a provider's test class runs every conformance test as written or
names it in ``skip_tests`` with a reason; one that redefines a conformance test fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from seer.testing import ProviderConformance
from seer.testing.conformance.base import overridden_tests, skip_problems, suite_tests

pytestmark = pytest.mark.unit


class _Overrides(ProviderConformance):
    provider_name = "local"

    def test_gpu(self) -> None:  # type: ignore[override]
        pytest.skip("no GPU here")


class _OverridesBelow(_Overrides):
    """A class of the provider's own between it and the suite counts as the provider's."""


class _Skips(ProviderConformance):
    provider_name = "local"
    skip_tests = {"test_gpu": "no GPU here", "test_no_such_thing": "a typo", "test_exec_stdout": " "}


def test_suite_is_composed_of_its_mixins() -> None:
    tests = suite_tests(ProviderConformance)
    assert {"test_gpu", "test_exec_stdout", "test_upload_and_download_dir", "test_expose_port"} <= tests
    assert "test_conformance_tests_run_as_written" in tests
    assert len(tests) > 60
    assert overridden_tests(ProviderConformance) == {} and skip_problems(ProviderConformance) == []


def test_an_override_is_found_wherever_the_provider_defines_it() -> None:
    assert overridden_tests(_Overrides) == {"test_gpu": "_Overrides"}
    assert overridden_tests(_OverridesBelow) == {"test_gpu": "_Overrides"}


def test_skip_tests_must_name_tests_and_give_reasons() -> None:
    assert overridden_tests(_Skips) == {}
    assert skip_problems(_Skips) == [
        "skip_tests names 'test_no_such_thing', which is no conformance test",
        "skip_tests['test_exec_stdout'] gives no reason",
    ]


_PROVIDER_TESTS = """
import pytest
from seer.testing import ProviderConformance


class TestOverriding(ProviderConformance):
    provider_name = "local"

    def test_gpu(self):
        pytest.skip("no GPU here")


class TestSkipping(ProviderConformance):
    provider_name = "local"
    skip_tests = {"test_gpu": "no GPU here, the live set runs it"}
"""


@pytest.mark.e2e
def test_a_provider_overriding_a_conformance_test_fails_the_guard(tmp_path: Path) -> None:
    """A real pytest run of a provider's test file: the class that redefines ``test_gpu`` fails
    (the guard test and the redefined test itself), the class that names it in ``skip_tests``
    passes the guard and reports the skip with its reason."""
    (tmp_path / "test_provider.py").write_text(textwrap.dedent(_PROVIDER_TESTS))
    report = tmp_path / "report.xml"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", f"--junitxml={report}",
         "-k", "test_gpu or run_as_written", "test_provider.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kids = [child for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[f"{case.get('classname', '').rpartition('.')[2]}::{case.get('name')}"] = (
            (kids[0].tag, kids[0].get("message", "")) if kids else ("passed", "")
        )
    assert outcomes["TestOverriding::test_conformance_tests_run_as_written"][0] == "failure"
    assert (
        "TestOverriding.test_gpu redefines a conformance test"
        in (outcomes["TestOverriding::test_conformance_tests_run_as_written"][1])
    )
    assert outcomes["TestOverriding::test_gpu"][0] == "error"  # failed in the guard, before its body
    assert outcomes["TestSkipping::test_conformance_tests_run_as_written"] == ("passed", "")
    assert outcomes["TestSkipping::test_gpu"] == ("skipped", "no GPU here, the live set runs it")

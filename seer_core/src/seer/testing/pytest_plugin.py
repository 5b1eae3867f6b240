"""seer's pytest plugin: what a provider's repository gets by installing ``seer-core[testing]``.

Registered through the ``pytest11`` entry point, so pytest loads it wherever seer-core is
installed (it imports only pytest until a fixture is used). It gives a third-party provider's
tests the conformance suite and the fixtures to run it in isolation:

* ``pytest --pyargs seer.testing.suite --seer-provider NAME`` runs the whole conformance suite
  (:mod:`seer.testing.suite`) against the installed provider ``NAME``, with no test file of the
  repository's own. ``--seer-skip TEST=REASON`` (repeatable) leaves out a test the provider
  cannot run here, with the reason; the ini options ``seer_provider`` and ``seer_skip_tests``
  (lines of ``TEST: REASON``) say the same in the repository's pytest configuration. A provider
  whose sandboxes need options (an image, a region) subclasses
  :class:`~seer.testing.ProviderConformance` in a test file instead and overrides its
  ``sandbox_config`` fixture.
* Fixtures: ``seer_test_home`` (session: ``SEER_HOME`` in a fresh directory, model hubs offline,
  so the tests never touch the user's records or Hugging Face cache), ``seer_provider_name``
  (the ``--seer-provider`` value) and ``seer_skip_tests`` (the skips given as options).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = [
    "pytest_addoption",
    "pytest_configure",
    "seer_provider_name",
    "seer_skip_tests",
    "seer_test_home",
    "skips_from",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``--seer-provider`` and ``--seer-skip`` options, and their ini counterparts."""
    group = parser.getgroup("seer", "seer provider conformance")
    group.addoption(
        "--seer-provider",
        dest="seer_provider",
        default=None,
        metavar="NAME",
        help="the installed seer provider that seer.testing.suite runs the conformance suite on",
    )
    group.addoption(
        "--seer-skip",
        dest="seer_skip",
        action="append",
        default=[],
        metavar="TEST=REASON",
        help="leave out a conformance test this provider cannot run here, with the reason",
    )
    parser.addini("seer_provider", "the seer provider seer.testing.suite runs the conformance suite on")
    parser.addini(
        "seer_skip_tests", "conformance tests to leave out: lines of 'test_name: reason'", type="linelist"
    )


def pytest_configure(config: pytest.Config) -> None:
    """Document the suite's options in ``pytest --markers``' neighbourhood (a marker for the suite)."""
    config.addinivalue_line("markers", "seer_conformance: a test of seer's provider conformance suite")


def skips_from(config: pytest.Config) -> dict[str, str]:
    """The conformance tests to skip, with their reasons, from ``--seer-skip`` and the ini option
    ``seer_skip_tests``; a usage error for an entry without a reason."""
    entries = [(e, "=") for e in config.getoption("seer_skip")] + [
        (e, ":") for e in config.getini("seer_skip_tests")
    ]
    skips: dict[str, str] = {}
    for entry, sep in entries:
        name, found, reason = entry.partition(sep)
        if not found or not name.strip() or not reason.strip():
            option = "--seer-skip TEST=REASON" if sep == "=" else "seer_skip_tests lines 'TEST: REASON'"
            raise pytest.UsageError(f"seer: {entry!r} gives no reason ({option})")
        skips[name.strip()] = reason.strip()
    return skips


@pytest.fixture(scope="session")
def seer_provider_name(pytestconfig: pytest.Config) -> str:
    """The provider the suite runs on: ``--seer-provider``, else the ini option ``seer_provider``."""
    name = pytestconfig.getoption("seer_provider") or pytestconfig.getini("seer_provider")
    if not name:
        raise pytest.UsageError(
            "seer: name the provider under test with --seer-provider NAME (or ini seer_provider)"
        )
    return str(name)


@pytest.fixture(scope="session")
def seer_skip_tests(pytestconfig: pytest.Config) -> dict[str, str]:
    """The conformance tests left out by option, each with its reason."""
    return skips_from(pytestconfig)


@pytest.fixture(scope="session")
def seer_test_home() -> Iterator[Path]:
    """``SEER_HOME`` in a fresh directory for the session (records, ledgers, outputs), with model
    hubs offline and Hugging Face's cache inside it; the environment is restored afterwards."""
    with tempfile.TemporaryDirectory(prefix="seer-test-home-") as home, pytest.MonkeyPatch.context() as mp:
        path = Path(home)
        mp.setenv("SEER_HOME", str(path))
        mp.setenv("SEER_OUTPUTS_DIR", str(path / "outputs"))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_HOME", str(path / "hf-home"))
        for name in ("HF_TOKEN", "SEER_PROVIDER", "SEER_LOAD_PLUGINS", "SEER_DISABLE_PLUGINS"):
            mp.delenv(name, raising=False)
        yield path

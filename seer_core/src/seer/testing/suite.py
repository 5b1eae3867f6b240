"""The conformance suite as a test module of its own, for a provider named on the command line::

    pytest --pyargs seer.testing.suite --seer-provider my-provider

(installed with ``seer-core[testing]``; :mod:`seer.testing.pytest_plugin` adds the options). It
runs :class:`~seer.testing.ProviderConformance` on the provider with the suite's default sandbox
config, in a fresh ``SEER_HOME``; ``--seer-skip TEST=REASON`` leaves out what the provider cannot
run here. A provider that needs more (an image, provider options, fixtures of its own) subclasses
:class:`~seer.testing.ProviderConformance` in its own tests instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from seer.testing.conformance import ProviderConformance

__all__ = ["TestProviderConformance"]


class TestProviderConformance(ProviderConformance):
    """The suite on the provider ``--seer-provider`` names."""

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def _named_provider(
        cls, seer_test_home: Path, seer_provider_name: str, seer_skip_tests: dict[str, str]
    ) -> None:
        """Name the provider under test (and its skips) before any other fixture of the class."""
        cls.provider_name = seer_provider_name
        cls.skip_tests = seer_skip_tests

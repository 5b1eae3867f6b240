"""The built-in ``local`` provider passes the provider conformance suite."""

from __future__ import annotations

from seer.testing import ProviderConformance


class TestLocalConformance(ProviderConformance):
    provider_name = "local"

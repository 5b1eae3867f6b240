"""The built-in ``local`` provider passes the provider conformance suite."""

from __future__ import annotations

import pytest
from seer.testing import ProviderConformance

pytestmark = pytest.mark.e2e


class TestLocalConformance(ProviderConformance):
    provider_name = "local"

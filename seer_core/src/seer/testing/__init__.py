"""Test kits for seer and for the authors of seer plugins.

``from seer.testing import ProviderConformance`` gives the contract suite every provider package
subclasses in its own tests (see :mod:`seer.testing.conformance`). It needs pytest, which seer
does not depend on, so it is imported only when asked for. :func:`killed_client` starts a
sandbox from a client process that is then killed (:mod:`seer.testing.clients`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seer.testing.clients import killed_client
    from seer.testing.conformance import ProviderConformance

__all__ = ["ProviderConformance", "killed_client"]


def __getattr__(name: str) -> Any:
    if name == "ProviderConformance":
        from seer.testing.conformance import ProviderConformance

        return ProviderConformance
    if name == "killed_client":
        from seer.testing.clients import killed_client

        return killed_client
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The RunPod API as seer uses it: credentials, the GPU catalogue with prices, seer's pods.

The runpod SDK is imported only here, and only when an API call is made (it is a heavy import).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seer.errors import SandboxError
from seer.providers.kit import gpu_matches

__all__ = ["GpuOffer", "api_key", "api_url", "gpu_offers", "sdk"]

#: Where the runpod SDK keeps the key ``runpod config`` writes.
CREDENTIALS = Path("~/.runpod/config.toml")


def api_key() -> str | None:
    """The API key: ``RUNPOD_API_KEY``, else runpod's config file (profile ``default``)."""
    key = os.environ.get("RUNPOD_API_KEY")
    if key:
        return key
    path = CREDENTIALS.expanduser()
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    profile = data.get("default")
    key = profile.get("api_key") if isinstance(profile, dict) else None
    return key if isinstance(key, str) and key else None


def api_url() -> str:
    """The API's base URL, as the SDK reads it (``RUNPOD_API_BASE_URL``)."""
    return os.environ.get("RUNPOD_API_BASE_URL", "https://api.runpod.io").rstrip("/")


def sdk() -> Any:
    """The runpod module with the key set (it reads it from a module variable)."""
    import runpod

    key = api_key()
    if not key:
        raise SandboxError("no RunPod API key: set RUNPOD_API_KEY, or run `runpod config`")
    runpod.api_key = key
    return runpod


@dataclass(frozen=True)
class GpuOffer:
    """A GPU type as RunPod offers it now."""

    id: str
    display_name: str
    memory_gb: int
    max_count: int
    #: the on-demand price per GPU-hour now, None when none is free
    price: float | None
    stock: str | None

    def describe(self) -> str:
        price = f"${self.price:.2f}/h" if self.price is not None else "none free now"
        return f"{self.id} ({self.memory_gb} GB, {price})"


_GPU_QUERY = """
query SeerGpuTypes {
  gpuTypes {
    id
    displayName
    memoryInGb
    maxGpuCount
    lowestPrice(input: {gpuCount: %d}) { uninterruptablePrice stockStatus }
  }
}
"""


def gpu_offers(count: int) -> list[GpuOffer]:
    """Every GPU type from the API's own list, with its price for ``count`` and stock now."""
    from runpod.api.graphql import run_graphql_query

    sdk()
    data = run_graphql_query(_GPU_QUERY % int(count))["data"]["gpuTypes"] or []
    offers = []
    for gpu in data:
        lowest = gpu.get("lowestPrice") or {}
        free = lowest.get("stockStatus") is not None and lowest.get("uninterruptablePrice") is not None
        offers.append(
            GpuOffer(
                gpu["id"],
                gpu.get("displayName") or gpu["id"],
                int(gpu.get("memoryInGb") or 0),
                int(gpu.get("maxGpuCount") or 0),
                float(lowest["uninterruptablePrice"]) if free else None,
                lowest.get("stockStatus"),
            )
        )
    return offers


def pick_gpu(wanted: str, count: int, offers: list[GpuOffer]) -> tuple[GpuOffer | None, str]:
    """The cheapest offer that is a ``wanted`` GPU (seer's name, or RunPod's own id) with ``count``
    free; else None and a message listing what is available, with prices."""
    matching = [
        o
        for o in offers
        if o.id == wanted or gpu_matches(wanted, o.id) or gpu_matches(wanted, o.display_name)
    ]
    exact = [o for o in matching if o.display_name.upper() == wanted.upper()]
    matching = exact or matching  # "L4" is RunPod's L4, not the L40S its name is part of
    usable = sorted(
        (o for o in matching if o.price is not None and o.max_count >= count), key=lambda o: o.price or 0
    )
    if usable:
        return usable[0], ""
    available = sorted((o for o in offers if o.price is not None), key=lambda o: o.price or 0)
    listing = "; ".join(o.describe() for o in available) or "none"
    if matching:
        why = f"RunPod has no {count} x {wanted} free now ({', '.join(o.describe() for o in matching)})"
    else:
        why = f"RunPod offers no GPU matching {wanted!r}"
    return None, f"{why}. Available now, per GPU-hour: {listing}"

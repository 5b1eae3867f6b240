"""The GPU catalogue: the GPU names seer itself knows, as plain values.

Which of them a provider offers (and any it offers besides) is the provider's to say
(``Capabilities.gpu_types``); a config's ``gpu`` is checked against those at preflight
(:mod:`seer.preflight`), never here, so nothing in this module needs a plugin.
"""

from __future__ import annotations

import difflib
import re

__all__ = ["GPU_CATALOGUE", "unknown_gpu_message"]

#: The GPU names seer understands, with what each is. Providers accept a subset (their catalogue).
GPU_CATALOGUE: dict[str, str] = {
    "T4": "NVIDIA T4, 16 GB",
    "L4": "NVIDIA L4, 24 GB",
    "A10G": "NVIDIA A10G, 24 GB",
    "A100": "NVIDIA A100, 40 GB (alias of A100-40GB)",
    "A100-40GB": "NVIDIA A100, 40 GB",
    "A100-80GB": "NVIDIA A100, 80 GB",
    "H100": "NVIDIA H100, 80 GB",
    "H200": "NVIDIA H200, 141 GB",
}


def unknown_gpu_message(value: str, known: set[str]) -> str:
    """What is wrong with the GPU name ``value``, given every name that is ``known``: the name
    it most likely means (case, spaces and '_' aside, or a close spelling) and the valid ones."""
    norm = {re.sub(r"[\s_]+", "-", k.upper()): k for k in known}
    wanted = re.sub(r"[\s_]+", "-", value.strip().upper())
    match = norm.get(wanted)
    if match is None:
        close = difflib.get_close_matches(wanted, list(norm), n=1, cutoff=0.8)
        match = norm[close[0]] if close else None
    hint = f" (did you mean {match!r}?)" if match else ""
    return f"unknown GPU {value!r}{hint}; valid: {', '.join(sorted(known))}, or None for CPU"

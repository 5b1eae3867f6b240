"""The NVIDIA GPUs of the host a provider's machines run on (the local machine, a local Docker
engine), and whether one is the catalogue's GPU a config asks for."""

from __future__ import annotations

import shutil
import subprocess


# --- GPUs ------------------------------------------------------------------------------------
def detect_gpus() -> list[str]:
    """Names of the NVIDIA GPUs on this host (empty without a driver)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def gpu_matches(wanted: str, found: str) -> bool:
    """Whether the GPU named ``found`` (as ``nvidia-smi`` names it) is a ``wanted`` one from the
    catalogue (``A100``, ``A100-80GB``...)."""
    family, _, memory = wanted.partition("-")
    found = found.upper().replace(" ", "")
    return family.upper() in found and (not memory or memory.upper().replace("GB", "") in found)

"""seer's GPU names as Modal spells them, and how many of each one sandbox can have.

:data:`MODAL_GPUS` is the provider's capability table (``Capabilities.gpu_types``): seer's catalogue
names Modal offers, plus Modal's own (``L40S``, ``B200``) so a config can ask for them.
A name or count not in it is refused by ``check_config`` before anything is made.
"""

from __future__ import annotations

__all__ = ["MAX_GPU_COUNT", "MODAL_GPUS", "modal_gpu"]

#: seer name -> (Modal's name, most GPUs of that type one sandbox can have).
MODAL_GPUS: dict[str, tuple[str, int]] = {
    "T4": ("T4", 8),
    "L4": ("L4", 8),
    "A10G": ("A10G", 4),
    "A100": ("A100-40GB", 8),  # seer's A100 is the 40 GB one (GPU_CATALOGUE)
    "A100-40GB": ("A100-40GB", 8),
    "A100-80GB": ("A100-80GB", 8),
    "L40S": ("L40S", 8),
    "H100": ("H100", 8),
    "H200": ("H200", 8),
    "B200": ("B200", 8),
}
MAX_GPU_COUNT = max(count for _, count in MODAL_GPUS.values())


def modal_gpu(gpu: str | None, count: int = 1) -> str | None:
    """The ``gpu=`` argument of ``modal.Sandbox.create``: ``"H100"``, ``"H100:2"``, or None."""
    if gpu is None:
        return None
    name = MODAL_GPUS[gpu][0]
    return f"{name}:{count}" if count > 1 else name

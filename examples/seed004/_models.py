"""The models the seed 004 examples run on: the tiny offline ones by default, the seed's real ones
with ``REAL_MODELS = True`` in an example (one line; then a GPU and, for the hidden adapter, an
HF_TOKEN with access to it are needed)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Models:
    model: str  # a plain model (Examples 1 and 3)
    adapter: str  # a PEFT adapter on ``base`` (Example 2)
    base: str
    gpu: str | None
    layer: int  # the layer the seed steers at


def seed_models(real: bool) -> Models:
    """The seed's Gemma 2 9B on an A100, or seer's tiny Llama and its LoRA adapter on the CPU
    (built offline and placed in this machine's Hugging Face cache; nothing is downloaded)."""
    if real:
        return Models(
            model="google/gemma-2-9b-it",
            adapter="user/gemma-adapter-secret-preference",
            base="google/gemma-2-9b-it",
            gpu="A100",
            layer=20,
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from seer.testing.tiny_model import install_tiny_models

    tiny = install_tiny_models()
    assert tiny.adapter_id is not None
    return Models(model=tiny.repo_id, adapter=tiny.adapter_id, base=tiny.repo_id, gpu=None, layer=1)

"""Activation steering: add a vector to the residual stream after one decoder layer.

::

    from steering_hook import create_steering_hook

    with create_steering_hook(model, layer_idx=20, vector=steering_vector, strength=2.0):
        outputs = model.generate(**inputs, max_new_tokens=50)

Works on any architecture :mod:`model_layers` knows (PEFT-wrapped models too), with layer
outputs given as tensors or tuples, and under a multi-device ``device_map`` (the vector is moved to
the layer's device and dtype once, then reused).
"""

from __future__ import annotations

from typing import Any

import torch
from model_layers import LayerHook, PerDevice, add_layer_hook, hidden_vector

__all__ = ["create_steering_hook"]


def create_steering_hook(model: Any, layer_idx: int, vector: Any, strength: float = 1.0) -> LayerHook:
    """Add ``strength * vector`` to decoder layer ``layer_idx``'s output at every position of
    every forward pass (so also to each token ``generate`` makes) until the hook is removed.

    Returns a :class:`~model_layers.LayerHook`, active at once: use it in a ``with`` block
    (removed on leaving it, even on an exception) or keep it and call ``.remove()``. ``strength=0``
    leaves the model's outputs exactly as they were.
    """
    delta = PerDevice(hidden_vector(model, vector, "steering vector") * float(strength))

    def steer(hidden: torch.Tensor) -> torch.Tensor:
        return hidden + delta.like(hidden)

    return add_layer_hook(model, layer_idx, steer)

"""Ablation: take a layer's contribution, or a direction, out of the residual stream.

::

    from ablation import ablate_direction, ablate_layer

    with ablate_direction(model, refusal_direction):  # every layer's output, orthogonal to it
        model.generate(**inputs)
    with ablate_layer(model, 3):  # layer 3 hands on its input unchanged
        logits = model(**inputs).logits

Both return handles that are also context managers, like every toolkit hook.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from model_layers import HookGroup, LayerHook, PerDevice, add_layer_hook, hidden_vector, layer_indices

__all__ = ["ablate_direction", "ablate_layer", "mean_ablate_layer"]


def ablate_direction(model: Any, direction: Any, layers: int | Iterable[int] | None = None) -> HookGroup:
    """Project ``direction`` out of the outputs of ``layers`` (default: every layer):
    ``h - (h . d) d`` with ``d`` the unit vector along it. ValueError for a zero direction."""
    unit = hidden_vector(model, direction, "direction")
    norm = unit.norm()
    if not torch.isfinite(norm) or norm == 0:
        raise ValueError("cannot ablate a zero (or non-finite) direction")
    moved = PerDevice(unit / norm)

    def project_out(hidden: torch.Tensor) -> torch.Tensor:
        d = moved.like(hidden)
        return hidden - (hidden @ d).unsqueeze(-1) * d

    return HookGroup(add_layer_hook(model, idx, project_out) for idx in layer_indices(model, layers))


def ablate_layer(model: Any, layer_idx: int) -> LayerHook:
    """Zero-ablate decoder layer ``layer_idx``'s contribution: it hands on its input unchanged."""
    return add_layer_hook(model, layer_idx, lambda hidden, hidden_in: hidden_in, with_input=True)


def mean_ablate_layer(model: Any, layer_idx: int, mean_contribution: torch.Tensor) -> LayerHook:
    """Replace layer ``layer_idx``'s contribution (output minus input) by ``mean_contribution``
    (``[hidden]``, e.g. its mean over a reference set of prompts)."""
    delta = PerDevice(hidden_vector(model, mean_contribution, "mean contribution"))

    def replace(hidden: torch.Tensor, hidden_in: torch.Tensor) -> torch.Tensor:
        return hidden_in + delta.like(hidden_in)

    return add_layer_hook(model, layer_idx, replace, with_input=True)

"""Activation patching: run one prompt with a layer's output taken from another prompt's run.

::

    from activation_patching import patch_activations

    clean = "The Eiffel Tower is in the city of"
    corrupt = "The Colosseum is in the city of"
    logits = patch_activations(model, tokenizer, source=clean, target=corrupt, layer=6, positions=[-1])

``patching_hook`` is the building block: it replaces a layer's output (at chosen positions) with a
stored activation in every forward pass until it is removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from activation_cache import capture
from model_layers import LayerHook, PerDevice, add_layer_hook, encode, layer_indices

__all__ = ["patch_activations", "patching_hook"]


def patching_hook(
    model: Any, layer_idx: int, activation: torch.Tensor, positions: Sequence[int] | None = None
) -> LayerHook:
    """Replace decoder layer ``layer_idx``'s output with ``activation`` (``[batch, seq, hidden]``,
    e.g. from :func:`activation_cache.capture`): everywhere when ``positions`` is None (the
    shapes must then match), else only at those token positions (negative from the end).

    A context manager and a handle, like every toolkit hook. Meant for single forward passes: a
    pass whose output cannot take the activation (another batch size or, with every position
    patched, another length) raises ValueError naming both shapes.
    """
    stored = PerDevice(activation)

    def patch(hidden: torch.Tensor) -> torch.Tensor:
        source = stored.like(hidden)
        if positions is None:
            if source.shape != hidden.shape:
                raise ValueError(
                    f"cannot patch layer {layer_idx}: its output has shape {tuple(hidden.shape)}, the "
                    f"activation {tuple(source.shape)}; pass positions=[...] to patch some tokens only"
                )
            return source.clone()
        if source.shape[0] != hidden.shape[0] or source.shape[-1] != hidden.shape[-1]:
            raise ValueError(
                f"cannot patch layer {layer_idx}: its output has shape {tuple(hidden.shape)}, the "
                f"activation {tuple(source.shape)} (batch size and hidden size must match)"
            )
        patched = hidden.clone()
        patched[:, list(positions)] = source[:, list(positions)]
        return patched

    return add_layer_hook(model, layer_idx, patch)


def patch_activations(
    model: Any,
    tokenizer: Any,
    source: str,
    target: str,
    layer: int,
    positions: Sequence[int] | None = None,
) -> torch.Tensor:
    """The logits (``[1, seq, vocab]``) of ``target`` run with decoder layer ``layer``'s output
    taken from a run of ``source``: at every position (the prompts must then tokenize to the same
    length) or at ``positions`` only (negative from the end, counted in each prompt)."""
    src = encode(model, tokenizer, source)
    tgt = encode(model, tokenizer, target)
    n_src, n_tgt = src["input_ids"].shape[1], tgt["input_ids"].shape[1]
    if positions is None and n_src != n_tgt:
        raise ValueError(
            f"source has {n_src} tokens and target {n_tgt}: patching every position needs equal "
            "lengths; pass positions=[-1] (or others) to patch some tokens only"
        )
    (idx,) = layer_indices(model, layer)
    activation = capture(model, src, idx)[idx]
    if positions is not None:
        # Each position counted in its own prompt: move the source's tokens to the target's slots.
        batch, width = activation.shape[0], activation.shape[-1]
        aligned = activation.new_zeros((batch, n_tgt, width))
        for pos in positions:
            aligned[:, pos] = activation[:, pos]
        activation = aligned
    with patching_hook(model, layer, activation, positions), torch.no_grad():
        return model(**tgt).logits

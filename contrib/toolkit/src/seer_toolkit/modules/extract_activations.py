"""Residual-stream activations after a decoder layer, for one text or a batch.

::

    from extract_activations import get_layer_activations

    pos = get_layer_activations(model, tokenizer, "I strongly agree.", layer=20)  # last token
    acts = get_layer_activations(model, tokenizer, texts, layer=20, position="mean")  # [n, hidden]

``get_layer_activations(model, tokenizer, text, layer=i)`` is what ``output_hidden_states[i + 1]``
holds for that token (for every layer but the last, whose entry in ``hidden_states`` has the final
norm applied), read with one hook instead of keeping every layer's states.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from activation_cache import capture
from model_layers import encode, layer_indices

__all__ = ["get_layer_activations", "select_positions"]

Position = int | str


def select_positions(acts: torch.Tensor, attention_mask: torch.Tensor, position: Position) -> Any:
    """Pick tokens out of ``acts`` (``[batch, seq, hidden]``), skipping padding on either side.

    ``position``: ``"last"`` (the last real token), an int (the n-th real token, negative from the
    end), ``"mean"`` (the mean over real tokens), each giving ``[batch, hidden]``; or ``"all"``,
    giving a list of ``[tokens, hidden]`` tensors, one per text.
    """
    mask = attention_mask.to(acts.device).bool()
    if position == "all":
        return [acts[i][mask[i]] for i in range(acts.shape[0])]
    if position == "mean":
        weights = mask.unsqueeze(-1).to(acts.dtype)
        return (acts * weights).sum(dim=1) / weights.sum(dim=1)
    lengths = mask.sum(dim=1)
    first = mask.int().argmax(dim=1)  # the first real token: 0 unless padded on the left
    if position == "last":
        offsets = lengths - 1
    elif isinstance(position, int) and not isinstance(position, bool):
        offsets = torch.full_like(lengths, position) if position >= 0 else lengths + position
        bad = [i for i in range(len(lengths)) if not 0 <= int(offsets[i]) < int(lengths[i])]
        if bad:
            raise IndexError(
                f"position {position} is outside text {bad[0]}, which has {int(lengths[bad[0]])} tokens"
            )
    else:
        raise ValueError(f"position must be 'last', 'mean', 'all' or an int, got {position!r}")
    return acts[torch.arange(acts.shape[0], device=acts.device), first + offsets]


def get_layer_activations(
    model: Any,
    tokenizer: Any,
    text: str | Sequence[str],
    layer: int,
    position: Position = "last",
    batch_size: int = 16,
) -> Any:
    """The residual stream after decoder layer ``layer`` (negative counts from the end).

    For one text: a ``[hidden]`` tensor at ``position`` (default the last token, as the seed's
    helper returns), or ``[tokens, hidden]`` with ``position="all"``. For a list of texts: they
    run in padded batches of ``batch_size`` and come back stacked, ``[n, hidden]`` (a list of
    ``[tokens_i, hidden]`` with ``"all"``). See :func:`select_positions` for ``position``.
    Tensors are detached and stay on the layer's device.
    """
    single = isinstance(text, str)
    texts = [text] if single else list(text)
    if not texts:
        raise ValueError("text is an empty list: pass a string or at least one string")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    (idx,) = layer_indices(model, layer)
    picked: list[Any] = []
    for start in range(0, len(texts), batch_size):
        inputs = encode(model, tokenizer, texts[start : start + batch_size])
        acts = capture(model, inputs, idx)[idx]
        chosen = select_positions(acts, inputs["attention_mask"], position)
        picked += list(chosen) if position == "all" else [chosen]
    if position == "all":
        return picked[0] if single else picked
    stacked = torch.cat(picked, dim=0)
    return stacked[0] if single else stacked

"""The logit lens: read each layer's residual stream as the model's final layers would.

::

    from logit_lens import logit_lens

    for row in logit_lens(model, tokenizer, "The capital of France is", top_k=3):
        print(row["layer"], row["tokens"], row["probs"])

A layer's hidden state goes through the model's final norm and unembedding (and Gemma 2's logit
soft-capping, where the config has it), so the last layer's lens equals the model's own logits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from activation_cache import capture
from model_layers import base_model, encode, final_norm, layer_indices, unembed

__all__ = ["layer_logits", "lens_logits", "logit_lens"]


def layer_logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """Logits for a residual-stream state (``[..., hidden]``): final norm, unembedding and,
    where the model has it, final logit soft-capping."""
    norm, head = final_norm(model), unembed(model)
    with torch.no_grad():
        normed = norm(hidden.to(next(norm.parameters(), hidden).device))
        logits = head(normed.to(head.weight.device, head.weight.dtype))
    cap = getattr(base_model(model).config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def lens_logits(
    model: Any,
    tokenizer: Any,
    text: str,
    layers: int | Iterable[int] | None = None,
    position: int = -1,
) -> dict[int, torch.Tensor]:
    """``{layer: logits [vocab]}`` at token ``position`` of ``text``, for ``layers`` (default all),
    from one forward pass."""
    inputs = encode(model, tokenizer, text)
    cache = capture(model, inputs, layers)
    return {idx: layer_logits(model, acts[0, position]) for idx, acts in cache.items()}


def logit_lens(
    model: Any,
    tokenizer: Any,
    text: str,
    layers: int | Iterable[int] | None = None,
    position: int = -1,
    top_k: int = 5,
) -> list[dict[str, Any]]:
    """For each of ``layers`` (default all), the ``top_k`` tokens the lens predicts at ``position``:
    ``[{"layer": i, "tokens": [...], "token_ids": [...], "probs": [...]}, ...]`` in layer order."""
    rows = []
    lens = lens_logits(model, tokenizer, text, layer_indices(model, layers), position)
    for idx, logits in sorted(lens.items()):
        probs = torch.softmax(logits.float(), dim=-1)
        top = torch.topk(probs, k=min(top_k, probs.shape[-1]))
        ids = top.indices.tolist()
        rows.append(
            {
                "layer": idx,
                "tokens": [tokenizer.decode([i]) for i in ids],
                "token_ids": ids,
                "probs": top.values.tolist(),
            }
        )
    return rows

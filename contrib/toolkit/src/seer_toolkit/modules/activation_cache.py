"""Activation caching: several decoder layers' outputs from one forward pass.

::

    from activation_cache import cache_activations, record_activations

    acts = cache_activations(model, tokenizer, "The Eiffel Tower is in", layers=[0, 5, 10])
    acts[5].shape  # [1, tokens, hidden]

    with record_activations(model, layers=[5]) as cache:  # around any forward pass, generate too
        model.generate(**inputs, max_new_tokens=10)
    cache[5]           # the last forward pass's output of layer 5
    cache.history[5]   # every forward pass's, in order (the prompt, then one per new token)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from model_layers import HookGroup, add_layer_hook, encode, layer_indices

__all__ = ["ActivationCache", "cache_activations", "capture", "record_activations"]


class ActivationCache(dict[int, torch.Tensor]):
    """Layer index -> that layer's output (``[batch, seq, hidden]``, detached) in the latest
    forward pass; ``history[layer]`` holds every pass's output while recording was on."""

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[int, list[torch.Tensor]] = {}
        #: the batch's attention mask, when :func:`cache_activations` tokenized it
        self.attention_mask: torch.Tensor | None = None


@contextmanager
def record_activations(model: Any, layers: int | Iterable[int] | None = None) -> Iterator[ActivationCache]:
    """Record the outputs of ``layers`` (default: all; negative counts from the end) in every
    forward pass run inside the block. The hooks come off when the block ends, also on an
    exception; what was recorded stays in the cache."""
    cache = ActivationCache()

    def recorder(idx: int) -> Any:
        def record(hidden: torch.Tensor) -> None:
            cache[idx] = hidden.detach()
            cache.history.setdefault(idx, []).append(cache[idx])

        return record

    with HookGroup(add_layer_hook(model, idx, recorder(idx)) for idx in layer_indices(model, layers)):
        yield cache


def capture(
    model: Any, inputs: Mapping[str, Any], layers: int | Iterable[int] | None = None
) -> ActivationCache:
    """The outputs of ``layers`` in one forward pass of ``model(**inputs)``, without gradients."""
    with record_activations(model, layers) as cache, torch.no_grad():
        model(**inputs)
    return cache


def cache_activations(
    model: Any, tokenizer: Any, text: str | Sequence[str], layers: int | Iterable[int] | None = None
) -> ActivationCache:
    """Tokenize ``text`` (one string, or a list padded into one batch) and return the outputs of
    ``layers`` (default: all) from a single forward pass, ``{layer: [batch, seq, hidden]}``. The
    batch's ``attention_mask`` is at ``cache.attention_mask``."""
    inputs = encode(model, tokenizer, text)
    cache = capture(model, inputs, layers)
    cache.attention_mask = inputs["attention_mask"]
    return cache

"""Find the decoder layers of a Hugging Face causal LM, whatever its architecture, and hook them.

Every toolkit module reaches layers through here, so steering, caching, patching, the logit lens
and ablation work alike on Llama, Mistral, Gemma / Gemma 2, Qwen 2, Phi, GPT-2, GPT-NeoX, OPT and
PEFT-wrapped models. A model it cannot place raises :class:`UnsupportedModelError` naming the
model's class and the places looked in.

Two things differ between architectures and transformers versions and are handled once, here:

* where the layers live (``model.layers``, ``transformer.h``, ``gpt_neox.layers``, ...);
* what a layer hands on: transformers 5 gives a decoder layer's forward hook a tensor, older
  versions a tuple whose first item is the hidden state. :func:`hidden_of` reads either and
  :func:`with_hidden` rebuilds the same shape around a new hidden state.

:func:`add_layer_hook` puts a function on a layer's output and returns a :class:`LayerHook`, which
is both a context manager and a plain handle (``.remove()``); removal is idempotent and happens on
leaving the ``with`` block even when it raises. With a multi-device ``device_map`` each layer
hands its own device's tensors to the hook, so the toolkit moves what it adds to that device.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

__all__ = [
    "HookGroup",
    "LayerHook",
    "PerDevice",
    "UnsupportedModelError",
    "add_layer_hook",
    "base_model",
    "decoder_layers",
    "encode",
    "final_norm",
    "get_layer",
    "hidden_of",
    "hidden_size",
    "hidden_vector",
    "input_device",
    "layer_indices",
    "num_layers",
    "padding",
    "unembed",
    "with_hidden",
]

#: Where causal LMs keep their decoder layers, as attribute paths from the model, commonest first.
LAYER_PATHS: tuple[str, ...] = (
    "model.layers",  # Llama, Mistral, Gemma, Gemma 2, Qwen 2, Phi, and most newer models
    "model.language_model.layers",  # multimodal wrappers (Gemma 3, Llava) in transformers 5
    "transformer.h",  # GPT-2, GPT-J, Bloom, Falcon
    "gpt_neox.layers",  # GPT-NeoX, Pythia
    "model.decoder.layers",  # OPT
    "transformer.layers",
    "layers",  # a bare decoder (LlamaModel)
    "h",  # a bare GPT2Model
)
#: Where they keep the norm applied before the unembedding, in the same order.
NORM_PATHS: tuple[str, ...] = (
    "model.norm",
    "model.final_layernorm",  # Phi
    "model.language_model.norm",
    "transformer.ln_f",
    "gpt_neox.final_layer_norm",
    "model.decoder.final_layer_norm",
    "transformer.norm_f",
    "norm",
    "ln_f",
)


class UnsupportedModelError(ValueError):
    """The toolkit cannot find a part (decoder layers, final norm, unembedding) of this model."""


def base_model(model: Any) -> Any:
    """The transformers model inside a PEFT wrapper (the model itself when it is not wrapped)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def _attr_path(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def decoder_layers(model: Any) -> torch.nn.ModuleList:
    """The model's decoder layers, in order.

    Looks in :data:`LAYER_PATHS`, then for the one ``ModuleList`` as long as the config's layer
    count; raises :class:`UnsupportedModelError` naming the model's class when neither finds them.
    """
    base = base_model(model)
    for path in LAYER_PATHS:
        found = _attr_path(base, path)
        if isinstance(found, torch.nn.ModuleList) and len(found) > 0:
            return found
    config = getattr(base, "config", None)
    count = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    if count:
        candidates = [m for m in base.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == count]
        if len(candidates) == 1:
            return candidates[0]
    raise UnsupportedModelError(
        f"cannot find the decoder layers of {type(model).__name__}"
        + (f" (wrapping {type(base).__name__})" if base is not model else "")
        + f": none of {', '.join(LAYER_PATHS)} is a ModuleList, and no single ModuleList has the "
        "config's num_hidden_layers entries"
    )


def num_layers(model: Any) -> int:
    """How many decoder layers the model has."""
    return len(decoder_layers(model))


def _index(model: Any, layer_idx: Any, count: int) -> int:
    if isinstance(layer_idx, bool) or not isinstance(layer_idx, int):
        raise TypeError(f"a layer index must be an int, got {layer_idx!r}")
    if not -count <= layer_idx < count:
        raise IndexError(
            f"layer {layer_idx} is out of range: {type(model).__name__} has {count} decoder layers "
            f"(0..{count - 1}, or -1..-{count} from the end)"
        )
    return layer_idx % count


def layer_indices(model: Any, layers: int | Iterable[int] | None) -> list[int]:
    """``layers`` (one index, several, or None for all; negative counts from the end) as
    non-negative indices, each checked against the model's layer count."""
    count = num_layers(model)
    if layers is None:
        return list(range(count))
    if isinstance(layers, int):
        return [_index(model, layers, count)]
    return [_index(model, i, count) for i in layers]


def get_layer(model: Any, layer_idx: int) -> torch.nn.Module:
    """Decoder layer ``layer_idx`` (negative counts from the end); IndexError naming the range."""
    layers = decoder_layers(model)
    return layers[_index(model, layer_idx, len(layers))]


def _part(model: Any, paths: Sequence[str], what: str) -> Any:
    base = base_model(model)
    for path in paths:
        found = _attr_path(base, path)
        if isinstance(found, torch.nn.Module):
            return found
    raise UnsupportedModelError(
        f"cannot find the {what} of {type(model).__name__}: none of {', '.join(paths)} exists"
    )


def final_norm(model: Any) -> torch.nn.Module:
    """The norm the model applies to the last layer's output before unembedding it."""
    return _part(model, NORM_PATHS, "final norm")


def unembed(model: Any) -> torch.nn.Module:
    """The output embedding (``lm_head``) turning a hidden state into logits."""
    head = base_model(model).get_output_embeddings()
    if head is None:
        raise UnsupportedModelError(f"{type(model).__name__} has no output embedding (is it a causal LM?)")
    return head


def hidden_size(model: Any) -> int:
    """The width of the residual stream."""
    return int(base_model(model).get_input_embeddings().embedding_dim)


def hidden_vector(model: Any, vector: Any, what: str = "vector") -> torch.Tensor:
    """``vector`` as a float32 ``[hidden]`` tensor; ValueError naming ``what`` and both sizes when
    it does not hold one value per hidden dimension."""
    vec = torch.as_tensor(vector).detach()
    width = hidden_size(model)
    if vec.numel() != width:
        raise ValueError(
            f"the {what} has shape {tuple(vec.shape)}, but {type(model).__name__}'s hidden size is "
            f"{width}: pass one value per hidden dimension"
        )
    return vec.reshape(width).to(torch.float32)


class PerDevice:
    """A tensor handed to hooks on whatever device and dtype each layer works in: copied there the
    first time it is asked for, then reused (what makes hooks work under a multi-device
    ``device_map`` at the cost of one copy per device)."""

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor.detach()
        self._copies: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}

    def like(self, hidden: torch.Tensor) -> torch.Tensor:
        """The tensor on ``hidden``'s device, in its dtype."""
        key = (hidden.device, hidden.dtype)
        copy = self._copies.get(key)
        if copy is None:
            copy = self._copies[key] = self.tensor.to(device=hidden.device, dtype=hidden.dtype)
        return copy


def input_device(model: Any) -> torch.device:
    """Where the model's inputs go: the input embedding's device (the first layer's, under a
    multi-device ``device_map``)."""
    return base_model(model).get_input_embeddings().weight.device


def hidden_of(output: Any) -> torch.Tensor:
    """The hidden state in what a decoder layer returned: a tensor (transformers 5) or the first
    item of a tuple (earlier versions)."""
    return output[0] if isinstance(output, tuple) else output


def with_hidden(output: Any, hidden: torch.Tensor) -> Any:
    """``output`` with its hidden state replaced by ``hidden``, in the same shape (tensor or tuple)."""
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


def _input_hidden(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


#: A layer hook: given the layer's output hidden state (and, asked for, its input one), return a
#: replacement hidden state, or None to leave it as it is.
HookFn = Callable[..., "torch.Tensor | None"]


class LayerHook:
    """A function on one decoder layer's output, active from creation until :meth:`remove`.

    Use it as a context manager (removed on leaving the block, exceptions included) or keep it
    as a handle and call ``remove()`` yourself; removing twice is harmless.
    """

    def __init__(self, model: Any, layer_idx: int, fn: HookFn, *, with_input: bool = False):
        self.layer_idx = layer_idx
        self.module = get_layer(model, layer_idx)
        self._fn = fn
        if with_input:
            self._handle = self.module.register_forward_hook(self._call_with_input, with_kwargs=True)
        else:
            self._handle = self.module.register_forward_hook(self._call)

    def _call(self, module: Any, args: Any, output: Any) -> Any:
        new = self._fn(hidden_of(output))
        return None if new is None else with_hidden(output, new)

    def _call_with_input(self, module: Any, args: Any, kwargs: Any, output: Any) -> Any:
        new = self._fn(hidden_of(output), _input_hidden(args, kwargs))
        return None if new is None else with_hidden(output, new)

    def remove(self) -> None:
        """Take the hook off the layer (idempotent)."""
        self._handle.remove()

    def __enter__(self) -> LayerHook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class HookGroup:
    """Several :class:`LayerHook` removed together: a context manager and a handle, like one hook."""

    def __init__(self, hooks: Iterable[LayerHook] = ()):
        self.hooks = list(hooks)

    def remove(self) -> None:
        """Take every hook off (idempotent)."""
        for hook in self.hooks:
            hook.remove()

    def __enter__(self) -> HookGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def add_layer_hook(model: Any, layer_idx: int, fn: HookFn, *, with_input: bool = False) -> LayerHook:
    """Run ``fn(hidden)`` (``fn(hidden, hidden_in)`` with ``with_input``) on decoder layer
    ``layer_idx``'s output at every forward pass; a tensor it returns replaces the output."""
    return LayerHook(model, layer_idx, fn, with_input=with_input)


@contextlib.contextmanager
def padding(tokenizer: Any, side: str | None = None) -> Iterator[Any]:
    """The tokenizer ready to pad a batch (its eos token as pad token when it has none, padding
    on ``side``); both put back afterwards, so the caller's tokenizer is left as it was."""
    old_pad, old_side = tokenizer.pad_token, tokenizer.padding_side
    if old_pad is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    if side is not None:
        tokenizer.padding_side = side
    try:
        yield tokenizer
    finally:
        tokenizer.padding_side = old_side
        if old_pad is None:
            tokenizer.pad_token = None


def encode(model: Any, tokenizer: Any, texts: str | Sequence[str], *, side: str = "right") -> Any:
    """``texts`` tokenized as one batch on the model's input device, padded on ``side`` when there
    are several. Right, by default, whatever the tokenizer's own setting: under a causal mask
    padding after a text cannot change it, while padding before it shifts the positions of models
    with absolute position embeddings (GPT-2) in a plain forward pass."""
    if isinstance(texts, str):
        texts = [texts]
    if not texts or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"expected a string or a non-empty list of strings, got {texts!r}")
    with padding(tokenizer, side):
        inputs = tokenizer(list(texts), return_tensors="pt", padding=len(texts) > 1)
    return inputs.to(input_device(model))

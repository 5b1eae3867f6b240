"""What runs in notebook kernels: the seed's first cell, the toolkit's checks, and a bare kernel.

The same first cell runs in seer's kernel (models pre-loaded) and in a bare Jupyter kernel that
loads the model by hand, so the two outputs can be compared word for word: device, dtype, logits
shape and the sum of the last position's logits.
"""

from __future__ import annotations

import json
import time
from typing import Any

#: The seed's first cell: the pre-loaded model used as it is.
FIRST_CELL = """\
import torch
inputs = tokenizer("The quick brown fox", return_tensors="pt").to(model.device)
with torch.no_grad():
    logits = model(**inputs).logits
print(model.device, model.dtype, tuple(logits.shape), repr(float(logits[0, -1].float().sum())))
"""

#: Loading by hand what seer pre-loads: the same files, device and dtype.
LOAD_BY_HAND = """\
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained({path!r}, dtype=getattr(torch, {dtype!r}), device_map={device!r})
tokenizer = AutoTokenizer.from_pretrained({path!r})
"""

#: The same with a PEFT adapter on its base.
LOAD_PEFT_BY_HAND = """\
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer
base = AutoModelForCausalLM.from_pretrained({base!r}, dtype=getattr(torch, {dtype!r}), device_map={device!r})
model = PeftModel.from_pretrained(base, {adapter!r})
model.eval()
tokenizer = AutoTokenizer.from_pretrained({base!r})
"""

#: The toolkit (steering, activations, patching, logit lens) against the same work written by hand
#: with plain forward hooks, on whatever device the model is on; prints one JSON line.
TOOLKIT_CELL = r"""
import json as _json, time as _time, torch
import activation_patching, extract_activations, logit_lens, model_layers, steering_hook

_TEXT = "The quick brown fox jumps over the lazy dog"
_dev = model_layers.input_device(model)
_mid = (model_layers.num_layers(model) - 1) // 2  # not the last: hidden_states[-1] is normed
_layers = model.model.layers  # by hand: where a Llama keeps its decoder layers

def _sync():
    if _dev.type == "cuda":
        torch.cuda.synchronize()

def _timed(fn):
    _sync(); started = _time.perf_counter(); out = fn(); _sync()
    return out, _time.perf_counter() - started

def _forward(text, **kw):
    inputs = tokenizer(text, return_tensors="pt").to(_dev)
    with torch.no_grad():
        return model(**inputs, **kw)

def _hook(layer, fn):
    def hook(module, args, output):
        hidden = output[0] if isinstance(output, tuple) else output
        new = fn(hidden)
        return (new, *output[1:]) if isinstance(output, tuple) else new
    return _layers[layer].register_forward_hook(hook)

_checks, _times = {}, {"toolkit": 0.0, "by_hand": 0.0}
def _both(name, toolkit, by_hand):
    toolkit(); by_hand(); _sync()  # the first run of a shape loads CUDA kernels: neither side alone pays it
    a, s = _timed(toolkit); _times["toolkit"] += s
    b, s = _timed(by_hand); _times["by_hand"] += s
    return a, b

# activations: a layer's output, every position, as hidden_states gives it
_acts, _ref = _both(
    "activations",
    lambda: extract_activations.get_layer_activations(model, tokenizer, _TEXT, layer=_mid, position="all"),
    lambda: _forward(_TEXT, output_hidden_states=True).hidden_states[_mid + 1][0],
)
_checks["activations equal hidden_states"] = bool(torch.equal(_acts, _ref)) and _acts.device == _dev

# steering: a contrast pair's difference added at one layer
_vec = (extract_activations.get_layer_activations(model, tokenizer, "I strongly agree", _mid)
        - extract_activations.get_layer_activations(model, tokenizer, "I disagree", _mid))
_plain = _forward(_TEXT).logits
def _tk_steer(strength):
    with steering_hook.create_steering_hook(model, layer_idx=_mid, vector=_vec, strength=strength):
        return _forward(_TEXT).logits
def _hand_steer():
    delta = (_vec.float() * 4.0).to(_dev, model.dtype)
    handle = _hook(_mid, lambda h: h + delta)
    try:
        return _forward(_TEXT).logits
    finally:
        handle.remove()
_steered, _by_hand = _both("steering", lambda: _tk_steer(4.0), _hand_steer)
_checks["steering equals a hand-written hook"] = bool(torch.equal(_steered, _by_hand))
_checks["steering changes the logits"] = not bool(torch.allclose(_steered, _plain, atol=1e-3))
_checks["steering at strength 0 changes nothing"] = bool(torch.equal(_tk_steer(0.0), _plain))
_checks["steering removed leaves the model as it was"] = bool(torch.equal(_forward(_TEXT).logits, _plain))

# patching: a prompt patched into itself at every layer is the clean run
def _hand_patch(layer):
    saved = {}
    grab = _hook(layer, lambda h: saved.setdefault("h", h.clone()))
    try:
        _forward(_TEXT)
    finally:
        grab.remove()
    put = _hook(layer, lambda h: saved["h"])
    try:
        return _forward(_TEXT).logits
    finally:
        put.remove()
_patched, _by_hand = _both(
    "patching",
    lambda: activation_patching.patch_activations(model, tokenizer, _TEXT, _TEXT, layer=_mid),
    lambda: _hand_patch(_mid),
)
_checks["patching a prompt into itself changes nothing"] = bool(torch.equal(_patched, _plain))
_checks["patching equals hand-written hooks"] = bool(torch.equal(_patched, _by_hand))

# logit lens: every layer through the final norm and the unembedding; the last is the logits
def _hand_lens():
    states = _forward(_TEXT, output_hidden_states=True).hidden_states
    with torch.no_grad():
        out = {i: model.lm_head(model.model.norm(states[i + 1][0, -1])) for i in range(len(_layers) - 1)}
        out[len(_layers) - 1] = model.lm_head(states[-1][0, -1])  # hidden_states[-1] is already normed
    return out
_lens, _by_hand = _both("logit lens", lambda: logit_lens.lens_logits(model, tokenizer, _TEXT), _hand_lens)
_last = len(_layers) - 1
try:
    torch.testing.assert_close(_lens[_last], _plain[0, -1])
    _checks["logit lens of the last layer is the model's logits"] = True
except AssertionError:
    _checks["logit lens of the last layer is the model's logits"] = False
_checks["logit lens equals the hand-written lens"] = all(
    torch.allclose(_lens[i].float(), _by_hand[i].float(), rtol=1.6e-2, atol=1e-5) for i in range(_last)
)
_checks["nothing left hooked"] = not any(
    isinstance(getattr(fn, "__self__", None), model_layers.LayerHook)
    for layer in _layers for fn in layer._forward_hooks.values()
)
print(_json.dumps({"checks": _checks, "times": _times, "device": str(_dev), "dtype": str(model.dtype)}))
"""


def last_json(text: str) -> Any:
    """The JSON object on the last line of ``text`` that holds one."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON line in the kernel's output: {text[-500:]!r}")


#: Prints how many seconds ago this kernel's process started (Linux: ``/proc``; ``-1`` elsewhere).
KERNEL_AGE = """\
def __kernel_age():
    import os
    try:
        with open("/proc/self/stat") as fh:
            start = int(fh.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as fh:
            return float(fh.read().split()[0]) - start
    except (OSError, ValueError, IndexError):
        return -1.0
print(repr(__kernel_age()))
del __kernel_age
"""


def bare_kernel(
    load: str, cell: str, timeout: float, phases: dict[str, float] | None = None
) -> tuple[float, str]:
    """Start a bare Jupyter kernel, load the model by hand (``load``), run ``cell``; return the
    seconds from start to ``cell``'s result and what it printed (stdout: warnings and loading bars
    go to stderr). ``phases``, when given, gets the seconds of each part: ``kernel`` (until it
    answers), ``load`` and ``cell``. The kernel is shut down after."""
    from jupyter_client.manager import start_new_kernel

    started = time.perf_counter()
    manager, client = start_new_kernel(kernel_name="python3", startup_timeout=timeout)
    if phases is not None:
        phases["kernel"] = time.perf_counter() - started
    try:
        out: list[str] = []
        err: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            content = msg.get("content", {})
            if msg.get("msg_type") == "stream":
                (out if content.get("name") == "stdout" else err).append(content.get("text", ""))
            elif msg.get("msg_type") == "error":
                err.append("\n".join(content.get("traceback", [])))

        for part, code in (("load", load), ("cell", cell)):
            begun = time.perf_counter()
            reply = client.execute_interactive(code, output_hook=hook, timeout=timeout)
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"the bare kernel failed: {''.join(err)[-1500:]}")
            if phases is not None:
                phases[part] = time.perf_counter() - begun
        return time.perf_counter() - started, "".join(out)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)

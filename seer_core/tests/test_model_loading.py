"""Loading the fetched models in the sandbox (what the notebook kernel does), describing them, and
scrubbing a hidden model's identity from the loaded objects.

The loading itself runs in the sandbox (``exec_python``), once for the module: one process loads
all three models (a plain one, a PEFT adapter on it, a hidden PEFT adapter on a hidden base) and
reports what the tests check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from _model_kit import HIDDEN_NEEDLES, TinyDirs, hf_home, hidden_hits, install_all, three_models, tiny_dirs
from seer import Sandbox, SandboxConfig
from seer.runtime.loading import describe, format_parameters, tokenizer_var_name

pytestmark = pytest.mark.e2e

_SCRIPT = r"""
import json
import torch
from seer.runtime.loading import describe, kernel_namespace, load_all

NEEDLES = __NEEDLES__
loaded = load_all()
out = {"namespace": sorted(kernel_namespace(loaded)), "describe": describe(loaded)}

model, tok, _ = loaded["model"]
inputs = tok("The quick brown fox", return_tensors="pt")
with torch.no_grad():
    generated = model.generate(**inputs, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    states = model(**inputs, output_hidden_states=True).hidden_states
out["new_tokens"] = generated.shape[1] - inputs["input_ids"].shape[1]
out["text"] = tok.decode(generated[0], skip_special_tokens=True)
out["hidden_states"] = [len(states), list(states[-1].shape)]
out["layers"] = model.config.num_hidden_layers
out["dtype"] = str(next(model.parameters()).dtype)
out["device"] = str(model.device)

fired = []
def hook(module, args, output):
    fired.append(list(output.shape) if torch.is_tensor(output) else type(output).__name__)
handle = model.model.layers[0].register_forward_hook(hook)
with torch.no_grad():
    model(**inputs)
handle.remove()
out["hook"] = fired

peft, peft_tok, _ = loaded["peft"]
with torch.no_grad():
    base_logits = model(**inputs).logits
    peft_logits = peft(**inputs).logits
    with peft.disable_adapter():
        disabled = peft(**inputs).logits
out["peft_type"] = type(peft).__name__
out["peft_diff"] = (peft_logits - base_logits).abs().max().item()
out["disabled_diff"] = (disabled - base_logits).abs().max().item()
out["peft_vocab"] = len(peft_tok)
out["plain_name_or_path"] = [model.config._name_or_path, tok.name_or_path]

secret, secret_tok, _ = loaded["secret"]
with torch.no_grad():
    prompt = secret_tok("Hello", return_tensors="pt")
    out["secret_generates"] = secret.generate(**prompt, max_new_tokens=3).shape[1]
base = secret.get_base_model()
out["scrubbed"] = {
    "model.name_or_path": base.name_or_path,
    "config._name_or_path": secret.config._name_or_path,
    "base config._name_or_path": base.config._name_or_path,
    "peft base_model_name_or_path": secret.peft_config["default"].base_model_name_or_path,
    "tokenizer.name_or_path": secret_tok.name_or_path,
    "tokenizer.init_kwargs.name_or_path": secret_tok.init_kwargs.get("name_or_path"),
}

def strings(obj, seen, depth=0):
    # Every string reachable through attributes, dicts and sequences (tensors skipped).
    if id(obj) in seen or depth > 60:
        return
    seen.add(id(obj))
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, (bytes, int, float, bool, type(None), torch.Tensor, torch.dtype, torch.device)):
        return
    elif isinstance(obj, dict):
        for key, value in list(obj.items()):
            yield from strings(key, seen, depth + 1)
            yield from strings(value, seen, depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for value in list(obj):
            yield from strings(value, seen, depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for key, value in list(vars(obj).items()):
            if key in ("_parameters", "_buffers"):
                continue
            yield from strings(value, seen, depth + 1)

texts = list(strings([secret, secret_tok], set()))
texts += [
    secret.config.to_json_string(),
    json.dumps(secret.peft_config["default"].to_dict(), default=str),
    secret.generation_config.to_json_string(),
    repr(secret_tok),
    repr(secret.config),
]
out["strings_scanned"] = len(texts)
out["leaks"] = sorted({t[:200] for t in texts if any(n in t for n in NEEDLES)})
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    dirs: TinyDirs = tiny_dirs(tmp_path_factory, worker_id)
    with hf_home(tmp_path_factory.mktemp("hf-loading")) as cache:
        install_all(dirs, cache)
        with Sandbox(SandboxConfig(models=three_models(), timeout=600)).start() as sb:
            result = sb.exec_python(_SCRIPT.replace("__NEEDLES__", repr(HIDDEN_NEEDLES)), timeout=240)
            assert result.ok, result.output[-4000:]
            line = next(ln for ln in result.stdout.splitlines() if ln.startswith("RESULT "))
            yield {"out": json.loads(line[len("RESULT ") :]), "stderr": result.stderr, "sandbox": sb}


def test_loaded_model_generates_and_exposes_hidden_states(loaded: dict[str, Any]) -> None:
    out = loaded["out"]
    assert out["namespace"] == ["model", "peft", "peft_tokenizer", "secret", "secret_tokenizer", "tokenizer"]
    assert out["new_tokens"] == 6 and out["text"]
    assert out["hidden_states"][0] == out["layers"] + 1 and out["hidden_states"][1][-1] == 64
    assert (out["dtype"], out["device"]) == ("torch.float32", "cpu")  # no GPU here: CPU, float32


def test_forward_hook_on_a_layer_fires(loaded: dict[str, Any]) -> None:
    # transformers 5 decoder layers return a tensor, not a tuple.
    assert loaded["out"]["hook"] and loaded["out"]["hook"][0][-1] == 64


def test_peft_adapter_changes_logits(loaded: dict[str, Any]) -> None:
    out = loaded["out"]
    assert out["peft_type"] == "PeftModelForCausalLM"
    assert out["peft_diff"] > 1e-3  # the adapter changes the output...
    assert out["disabled_diff"] < 1e-5  # ...and disabling it gives the base model back
    assert out["peft_vocab"] > 0  # the adapter has no tokenizer: the base's is used


def test_hidden_model_identity_is_scrubbed(loaded: dict[str, Any]) -> None:
    out = loaded["out"]
    assert out["secret_generates"] > 0
    assert set(out["scrubbed"].values()) == {"hidden-model"}, out["scrubbed"]
    assert out["strings_scanned"] > 100
    assert out["leaks"] == []
    # The plain model is left alone.
    assert all(p.endswith(loaded["sandbox"].model_handles[0].commit) for p in out["plain_name_or_path"])


def test_describe_names_models_but_not_a_hidden_one(loaded: dict[str, Any]) -> None:
    text = loaded["out"]["describe"]
    assert text.startswith(
        "### Pre-loaded Models\n\nThe following models are already loaded in the kernel:\n"
    )
    assert (
        "**model** (seer-testing/tiny-llama)\n- Type: LlamaForCausalLM\n- Device: cpu\n- Dtype: float32\n"
        "- Parameters: " in text
    )
    assert "**tokenizer** (seer-testing/tiny-llama)\n- Type: " in text and "- Vocab size: " in text
    assert "**peft** (seer-testing/tiny-llama-lora)\n- Type: PeftModelForCausalLM" in text
    assert "**peft_tokenizer** (seer-testing/tiny-llama-lora)" in text
    assert "**secret** (hidden model)" in text and "**secret_tokenizer** (hidden model)" in text
    assert text.endswith(
        "**IMPORTANT:** Do NOT reload these models. They are already loaded and ready to use."
    )
    assert not hidden_hits(text)
    assert not hidden_hits(loaded["stderr"])


# --- formatting, without loading anything -----------------------------------------------------
class _Param:
    dtype = "torch.bfloat16"

    def __init__(self, n: int):
        self.n = n

    def numel(self) -> int:
        return self.n


class _FakeModel:
    device = "cuda:0"

    def parameters(self) -> Iterator[_Param]:
        yield _Param(9_000_000_000)
        yield _Param(241_705_984)


class _FakeTokenizer:
    def __len__(self) -> int:
        return 256_000


@pytest.mark.unit
def test_describe_format_matches_model_info_text() -> None:
    entry = {"var_name": "model", "name": "google/gemma-2-9b-it", "display_name": "google/gemma-2-9b-it"}
    text = describe({"model": (_FakeModel(), _FakeTokenizer(), entry)})
    assert text == (
        "### Pre-loaded Models\n\n"
        "The following models are already loaded in the kernel:\n\n"
        "**model** (google/gemma-2-9b-it)\n"
        "- Type: _FakeModel\n"
        "- Device: cuda:0\n"
        "- Dtype: bfloat16\n"
        "- Parameters: 9.24B\n\n"
        "**tokenizer** (google/gemma-2-9b-it)\n"
        "- Type: _FakeTokenizer\n"
        "- Vocab size: 256,000\n\n"
        "**IMPORTANT:** Do NOT reload these models. They are already loaded and ready to use."
    )


@pytest.mark.unit
def test_parameter_counts_and_tokenizer_names() -> None:
    assert [format_parameters(n) for n in (9_241_705_984, 1_200_000, 12_500, 7)] == [
        "9.24B",
        "1.20M",
        "12.50K",
        "7",
    ]
    assert tokenizer_var_name("model") == "tokenizer"
    assert tokenizer_var_name("model_a") == "model_a_tokenizer"

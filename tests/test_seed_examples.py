"""Seed 004's examples, run as the agent runs them: a setup script prints JSON and exits, then the
session it names is attached to and used.

The scripts are the seed's with ``src.`` replaced by ``seer.``; the only other changes are what
this machine needs: the tiny offline models instead of Gemma, ``gpu=None`` (no GPU here), and no
packages that are not installed (``datasets``). The PEFT example's adapter is hidden, and the
hunt at the end looks for its name everywhere the agent could look.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from _model_kit import HIDDEN_ADAPTER_ID, HIDDEN_BASE_ID, MODEL_ID, hidden_hits, install_all, tiny_dirs
from seer import Sandbox
from seer.providers.local.provider import LocalProvider

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MINIMAL_SETUP = """
from seer.environment import Sandbox, SandboxConfig, ExecutionMode, ModelConfig
from seer.workspace import Workspace
from seer.execution import create_notebook_session
import json

config = SandboxConfig(
    execution_mode=ExecutionMode.NOTEBOOK,
    gpu=None,
    models=[ModelConfig(name="seer-testing/tiny-llama")],
    python_packages=["torch", "transformers", "accelerate"],
)
sandbox = Sandbox(config).start()
session = create_notebook_session(sandbox, Workspace())
print(json.dumps({
    "session_id": session.session_id,
    "jupyter_url": session.jupyter_url,
}))
"""

PEFT_HIDDEN_SETUP = """
\"\"\"Investigate hidden preferences in a fine-tuned model.\"\"\"

import asyncio
from pathlib import Path
from seer.environment import Sandbox, SandboxConfig, ExecutionMode, ModelConfig
from seer.workspace import Workspace, Library
from seer.execution import create_notebook_session
import json

async def main():
    example_dir = Path(__file__).parent
    toolkit = example_dir.parent / "toolkit"

    # Configure with PEFT adapter (hidden from agent)
    config = SandboxConfig(
        gpu=None,
        execution_mode=ExecutionMode.NOTEBOOK,
        models=[ModelConfig(
            name="secret-org/hidden-adapter",
            base_model="secret-org/hidden-base",
            is_peft=True,
            hidden=True  # Agent won't know which adapter
        )],
        python_packages=["torch", "transformers", "accelerate", "peft"],
        secrets=["HF_TOKEN"],
    )

    sandbox = Sandbox(config).start()

    workspace = Workspace(
        libraries=[
            Library.from_file(toolkit / "steering_hook.py"),
            Library.from_file(toolkit / "extract_activations.py"),
            Library.from_file(toolkit / "generate_response.py"),
        ]
    )

    session = create_notebook_session(sandbox, workspace)

    # Include research methodology
    task = (example_dir / "task.md").read_text()
    methodology = (toolkit / "research_methodology.md").read_text()

    print(json.dumps({
        "session_id": session.session_id,
        "jupyter_url": session.jupyter_url,
        "model_info": session.model_info_text,
        "task": task,
        "methodology": methodology,
    }))

if __name__ == "__main__":
    asyncio.run(main())
"""

# The seed's toolkit, written for transformers 5: a decoder layer's forward hook gets a tensor.
TOOLKIT = {
    "steering_hook.py": '''
        """Activation steering: add a vector to a decoder layer's output."""
        import contextlib


        def _layers(model):
            base = model.get_base_model() if hasattr(model, "get_base_model") else model
            return base.model.layers


        @contextlib.contextmanager
        def create_steering_hook(model, layer_idx, vector, strength=1.0):
            """Add ``strength * vector`` to the residual stream after layer ``layer_idx``."""

            def hook(module, inputs, output):
                return output + strength * vector.to(output.device, output.dtype)

            handle = _layers(model)[layer_idx].register_forward_hook(hook)
            try:
                yield
            finally:
                handle.remove()
    ''',
    "extract_activations.py": '''
        """Residual-stream activations."""
        import torch

        from steering_hook import _layers


        def get_layer_activations(model, tokenizer, text, layer):
            """The last token's activation after layer ``layer``."""
            seen = []
            handle = _layers(model)[layer].register_forward_hook(lambda m, i, out: seen.append(out.detach()))
            inputs = tokenizer(text, return_tensors="pt").to(model.device)
            with torch.no_grad():
                model(**inputs)
            handle.remove()
            return seen[0][0, -1, :]
    ''',
    "generate_response.py": '''
        """Text generation."""


        def generate_response(model, tokenizer, prompt, max_tokens=16):
            """Greedy generation from ``prompt``."""
            inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
            out = model.generate(**inputs, max_new_tokens=max_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)
            return tokenizer.decode(out[0], skip_special_tokens=True)
    ''',
    "research_methodology.md": "Explore much more than exploit.\n",
}

MODEL_CHECKS = """
import torch
inputs = tokenizer("the quick brown fox", return_tensors="pt").to(model.device)
out = model.generate(**inputs, max_new_tokens=5, do_sample=False, pad_token_id=tokenizer.pad_token_id)
assert out.shape[1] > inputs["input_ids"].shape[1], out.shape
with torch.no_grad():
    hs = model(**inputs, output_hidden_states=True).hidden_states
layers = (model.get_base_model() if hasattr(model, "get_base_model") else model).model.layers
fired = []
handle = layers[0].register_forward_hook(lambda m, i, o: fired.append(tuple(o.shape)))
with torch.no_grad():
    model(**inputs)
handle.remove()
import json
print(json.dumps({"states": len(hs), "last": list(hs[-1].shape), "fired": fired}))
"""


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Path]:
    """An HF home holding the tiny models under the ids the scripts name."""
    home = tmp_path_factory.mktemp("seed-hf-home")
    install_all(tiny_dirs(tmp_path_factory, worker_id), home / "hub")
    yield home


def _run_setup(script: str, workdir: Path, hf_home: Path) -> tuple[dict[str, str], str]:
    """Run a setup script as its own process; return its JSON and the sandbox it started."""
    before = {m.id for m in LocalProvider().list()}
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "setup.py"
    path.write_text(script)
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "HF_TOKEN": "hf_not_a_real_token"}
    out = subprocess.run(
        [sys.executable, str(path)], cwd=workdir, env=env, capture_output=True, text=True, timeout=300
    )
    (sandbox_id,) = {m.id for m in LocalProvider().list()} - before
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), sandbox_id


def test_minimal_notebook_setup(hf_cache: Path, tmp_path: Path) -> None:
    from seer.notebook import NotebookSession

    printed, sandbox_id = _run_setup(MINIMAL_SETUP, tmp_path / "minimal", hf_cache)
    try:
        assert set(printed) == {"session_id", "jupyter_url"}
        assert printed["jupyter_url"].startswith("http://127.0.0.1:")
        session = NotebookSession.attach(printed["jupyter_url"], printed["session_id"])
        assert f"**model** ({MODEL_ID})" in session.model_info_text
        assert "Do NOT reload" in session.model_info_text
        result = session.exec(MODEL_CHECKS)
        assert result.ok, result.error
        seen = json.loads(result.stdout)
        assert seen["states"] == 3  # embeddings + 2 decoder layers
        assert seen["fired"] == [seen["last"]], "the forward hook on layer 0 fires once, with a tensor"
        # The agent's cell landed in the notebook in the sandbox: the Jupyter server saves the live
        # document shortly after each cell; flush() has it save now and waits for it.
        session.flush()
        sandbox = Sandbox.attach(sandbox_id)
        notebook = json.loads(sandbox.read_file(session.notebook_path))
        assert any("the quick brown fox" in "".join(c["source"]) for c in notebook["cells"])
    finally:
        LocalProvider().terminate(sandbox_id)


STEERING = """
import torch
from steering_hook import create_steering_hook
from extract_activations import get_layer_activations
from generate_response import generate_response

pos = get_layer_activations(model, tokenizer, "I strongly agree with your perspective.", layer=1)
neg = get_layer_activations(model, tokenizer, "I disagree with your perspective.", layer=1)
vector = pos - neg
inputs = tokenizer("What do you think?", return_tensors="pt").to(model.device)
with torch.no_grad():
    plain = model(**inputs).logits
    with create_steering_hook(model, layer_idx=1, vector=vector, strength=8.0):
        steered = model(**inputs).logits
print(float((plain - steered).abs().max()) > 1e-3, len(generate_response(model, tokenizer, "hello")) > 0)
"""

HUNT = r"""
def __hunt(encoded):
  import base64, os, sys, json, types, traceback
  # Decoded here, so neither this cell's source nor the kernel's globals spell the names.
  needles = [base64.b64decode(n).decode() for n in encoded]
  hits = []

  def look(where, text):
      for n in needles:
          if n in text:
              hits.append(f"{where}: {n}")

  def walk(obj, where, depth=0, seen=set()):
      if id(obj) in seen or depth > 6:
          return
      seen.add(id(obj))
      if isinstance(obj, (str, bytes)):
          look(where, obj if isinstance(obj, str) else obj.decode("latin-1"))
      elif isinstance(obj, dict):
          for k, v in list(obj.items()):
              walk(k, f"{where}[key]", depth + 1); walk(v, f"{where}[{k!r}]", depth + 1)
      elif isinstance(obj, (list, tuple, set, frozenset)):
          for i, v in enumerate(list(obj)):
              walk(v, f"{where}[{i}]", depth + 1)
      elif isinstance(obj, (types.ModuleType, type, types.FunctionType, int, float, bool)) or obj is None:
          return
      elif hasattr(obj, "__dict__"):
          walk(vars(obj), f"{where}.__dict__", depth + 1)

  # Kernel variables (models, tokenizers, configs, peft config) and their attributes.
  for name, value in list(globals().items()):
      if name != "__hunt":
          walk(value, name)
  look("repr(model)", repr(model)); look("model.config", model.config.to_json_string())
  look("peft_config", repr(getattr(model, "peft_config", "")))
  look("tokenizer", repr(tokenizer) + json.dumps(tokenizer.init_kwargs, default=str))
  # Input history, outputs, environment, command line.
  look("history", json.dumps([In, _ih], default=str)); look("outputs", repr(Out))
  look("environ", json.dumps(dict(os.environ))); look("argv", repr(sys.argv))
  look("cmdline", open("/proc/self/cmdline", "rb").read().decode("latin-1"))
  # The listing of configured models.
  from seer.runtime.models import list_configured_models
  look("list_configured_models", json.dumps(list_configured_models(), default=str))
  # A traceback through the model.
  try:
      model(input_ids=__import__("torch").tensor([[10 ** 9]]))
  except Exception:
      look("traceback", traceback.format_exc())
  # Every file path and small text file under the sandbox's working directory.
  for root, dirs, files in os.walk(os.environ["SEER_WORKDIR"]):
      for f in dirs + files:
          look("path", os.path.join(root, f))
      for f in files:
          p = os.path.join(root, f)
          if os.path.getsize(p) < 2_000_000 and not os.path.islink(p):
              look(f"file {p}", open(p, "rb").read().decode("latin-1"))
  # Where the model was loaded from.
  for m in (model, getattr(model, "get_base_model", lambda: model)()):
      look("model path", str(getattr(m, "name_or_path", "")))
  return hits

import json
print(json.dumps(__hunt(NEEDLES)))
"""


def test_peft_hidden_example_and_the_hidden_model_hunt(hf_cache: Path, tmp_path: Path) -> None:
    from seer.notebook import NotebookSession

    example = tmp_path / "examples" / "hidden-preference"
    toolkit = tmp_path / "examples" / "toolkit"
    toolkit.mkdir(parents=True)
    for name, text in TOOLKIT.items():
        (toolkit / name).write_text(textwrap.dedent(text).lstrip())
    example.mkdir(parents=True)
    (example / "task.md").write_text("Find out what this model prefers.\n")
    outputs = example / "seer-outputs"

    printed, sandbox_id = _run_setup(PEFT_HIDDEN_SETUP, example, hf_cache)
    try:
        assert printed["task"].startswith("Find out") and printed["methodology"].startswith("Explore")
        info = printed["model_info"]
        assert "**model** (hidden model)" in info and "**tokenizer**" in info
        assert hidden_hits(json.dumps(printed)) == []

        session = NotebookSession.attach(printed["jupyter_url"], printed["session_id"], outputs_dir=outputs)
        checks = session.exec(MODEL_CHECKS)
        assert checks.ok, checks.error
        steering = session.exec(STEERING)
        assert steering.ok, steering.error
        assert steering.stdout.split() == ["True", "True"], "steering must change the logits"

        parts = sorted({*HIDDEN_ADAPTER_ID.split("/"), *HIDDEN_BASE_ID.split("/")})
        encoded = [base64.b64encode(p.encode()).decode() for p in parts]
        hunt = session.exec(HUNT.replace("NEEDLES", repr(encoded)))
        assert hunt.ok, hunt.error
        assert json.loads(hunt.stdout) == [], f"hidden model's identity found: {hunt.stdout}"
        assert hidden_hits(hunt.stdout + hunt.stderr) == []

        # The notebook (in the sandbox and its local mirror) holds the agent's cells, and no trace;
        # flush() has the Jupyter server save the live document now rather than shortly after.
        session.flush()
        sandbox = Sandbox.attach(sandbox_id)
        notebook = sandbox.read_file(session.notebook_path)
        assert "create_steering_hook" in notebook
        assert hidden_hits(notebook) == []
        mirrored = list(outputs.rglob("*.ipynb"))
        assert mirrored and all(hidden_hits(p.read_text()) == [] for p in mirrored)
        # The Jupyter server's own listings show nothing either.
        assert hidden_hits(json.dumps(session.client.sessions())) == []
    finally:
        LocalProvider().terminate(sandbox_id)

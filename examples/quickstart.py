"""seer's quickstart: a sandbox with a model already loaded in a notebook kernel, start to finish.

    python examples/quickstart.py

It builds a tiny Llama-style model offline (no model hub needed) and places it in this machine's
Hugging Face cache as ``seer-testing/tiny-llama``; then it starts a notebook sandbox on the
built-in local provider, where seer fetches the model (from the cache: nothing is downloaded),
starts Jupyter and a kernel with ``model`` and ``tokenizer`` pre-loaded, runs cells in it the way
an agent would, and tears everything down.

To use a real model instead, set ``MODEL = "google/gemma-2-2b-it"`` (any hub id; it is downloaded
once into your Hugging Face cache) and drop the two tiny-model lines.
"""

from __future__ import annotations

import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the tiny model is local; no hub is contacted

from seer.environment import ExecutionMode, ModelConfig, Sandbox, SandboxConfig
from seer.execution import create_notebook_session
from seer.testing.tiny_model import install_tiny_models
from seer.workspace import Workspace

MODEL = install_tiny_models(adapter_id=None).repo_id  # "seer-testing/tiny-llama", built offline


def main() -> None:
    config = SandboxConfig(
        execution_mode=ExecutionMode.NOTEBOOK,
        gpu=None,  # CPU here; e.g. gpu="A100" on a provider (or machine) that has one
        models=[ModelConfig(name=MODEL)],
        python_packages=["torch", "transformers"],
        timeout=900,  # the sandbox tears itself down after 15 minutes, whatever happens here
    )
    t0 = time.monotonic()
    sandbox = Sandbox(config).start(name="quickstart")
    try:
        session = create_notebook_session(sandbox, Workspace(), name="quickstart", outputs_dir=False)
        ready = time.monotonic() - t0
        print(f"sandbox {sandbox.sandbox_id} ready in {ready:.1f} s; what a setup script prints:")
        print(json.dumps({"session_id": session.session_id, "jupyter_url": session.jupyter_url}))
        print(session.model_info_text)

        # The agent's cells: the model is already loaded, so it is simply used.
        result = session.exec(
            "inputs = tokenizer('the quick brown fox', return_tensors='pt').to(model.device)\n"
            "out = model.generate(**inputs, max_new_tokens=6, do_sample=False,"
            " pad_token_id=tokenizer.pad_token_id)\n"
            "print(out[0, inputs['input_ids'].shape[1]:].tolist())\n"
        )
        # (The tiny model's weights are random, so its tokens are not words.)
        print(f"generate -> new token ids {result.stdout.strip()}")
        hidden = session.exec(
            "import torch\n"
            "with torch.no_grad():\n"
            "    hs = model(**inputs, output_hidden_states=True).hidden_states\n"
            "print(len(hs), tuple(hs[-1].shape))\n"
        )
        print(f"hidden states (count, last shape) -> {hidden.stdout.strip()}")

        # The same sandbox is a shell too; the model's path is in the environment.
        path = sandbox.exec("echo $MODEL_SEER_TESTING_TINY_LLAMA_PATH", check=True).stdout.strip()
        print(f"model files in the sandbox: {path}")
        print(f"every visible cell is in the notebook {session.notebook_path} (open {session.jupyter_url})")
        assert result.ok and hidden.ok, (result.error, hidden.error)
    finally:
        sandbox.terminate()
    print(f"terminated: status is now {sandbox.status.value!r}; nothing is left running")


if __name__ == "__main__":
    main()

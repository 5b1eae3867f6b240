"""Shared by seer_core/tests/test_models.py, test_model_loading.py and others: tiny models built
once per run, an isolated Hugging Face cache holding them, and the model ids the tests use.

The tiny model and adapters are built in a subprocess (the pytest workers never import torch for
it) into a directory all xdist workers share, under a file lock, so a run builds them once.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

MODEL_ID = "seer-testing/tiny-llama"
ADAPTER_ID = "seer-testing/tiny-llama-lora"
#: A hidden PEFT adapter and its base: names that must appear nowhere the agent can look.
HIDDEN_ADAPTER_ID = "secret-org/hidden-adapter"
HIDDEN_BASE_ID = "secret-org/hidden-base"
#: Substrings of the hidden ids searched for (the org and each repo name on its own).
HIDDEN_NEEDLES = ("secret-org", "hidden-adapter", "hidden-base")

_BUILD = """
import json, sys
from pathlib import Path
from seer.testing.tiny_model import build_tiny_adapter, build_tiny_model
root = Path(sys.argv[1])
model = build_tiny_model(root / "model")
build_tiny_adapter(root / "adapter", model, base_model_name_or_path=sys.argv[2])
build_tiny_adapter(root / "hidden-adapter", model, seed=1, base_model_name_or_path=sys.argv[3])
"""


@dataclass(frozen=True)
class TinyDirs:
    model: Path
    adapter: Path
    hidden_adapter: Path


def tiny_dirs(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> TinyDirs:
    """The tiny model, its adapter, and an adapter whose base is :data:`HIDDEN_BASE_ID`."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    import seer.testing.tiny_model as tiny_model

    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    key = hashlib.sha256(Path(tiny_model.__file__).read_bytes()).hexdigest()[:12]
    root = shared / f"seer-tiny-models-{key}"
    with FileLock(str(shared / f"seer-tiny-models-{key}.lock")):
        if not (root / ".complete").is_file():
            subprocess.run(
                [sys.executable, "-c", _BUILD, str(root), MODEL_ID, HIDDEN_BASE_ID],
                check=True,
                capture_output=True,
                env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )
            (root / ".complete").write_text("ok")
    return TinyDirs(root / "model", root / "adapter", root / "hidden-adapter")


def install_all(dirs: TinyDirs, cache_dir: Path) -> dict[str, str]:
    """Install every test repo into the hub cache ``cache_dir``; ``{repo id: commit}``."""
    from seer.testing.tiny_model import install_in_hub_cache

    return {
        MODEL_ID: install_in_hub_cache(dirs.model, MODEL_ID, cache_dir=cache_dir),
        ADAPTER_ID: install_in_hub_cache(dirs.adapter, ADAPTER_ID, cache_dir=cache_dir),
        HIDDEN_BASE_ID: install_in_hub_cache(dirs.model, HIDDEN_BASE_ID, cache_dir=cache_dir),
        HIDDEN_ADAPTER_ID: install_in_hub_cache(dirs.hidden_adapter, HIDDEN_ADAPTER_ID, cache_dir=cache_dir),
    }


def three_models() -> list[dict[str, object]]:
    """A plain model, a PEFT adapter on it, and a hidden PEFT adapter on a hidden base."""
    return [
        {"name": MODEL_ID},
        {"name": ADAPTER_ID, "is_peft": True, "base_model": MODEL_ID, "var_name": "peft"},
        {
            "name": HIDDEN_ADAPTER_ID,
            "is_peft": True,
            "base_model": HIDDEN_BASE_ID,
            "hidden": True,
            "var_name": "secret",
        },
    ]


@contextmanager
def hf_home(path: Path) -> Iterator[Path]:
    """Point ``HF_HOME`` (which local sandboxes inherit) at ``path``; return its hub cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HOME", str(path))
        mp.delenv("HF_HUB_CACHE", raising=False)
        yield path / "hub"


def hidden_hits(text: str) -> list[str]:
    """The hidden ids' parts found in ``text``."""
    return [n for n in HIDDEN_NEEDLES if n in text]


def dump(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, default=str)

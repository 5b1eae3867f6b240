"""The toolkit's tests: its modules importable as a kernel has them, a tokenizer, and a tiny model
of each architecture (see _tiny_archs.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"

import seer_toolkit

# The kernel has the modules' folder on sys.path; so do these tests.
if str(seer_toolkit.MODULES_DIR) not in sys.path:
    sys.path.insert(0, str(seer_toolkit.MODULES_DIR))

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from _tiny_archs import ARCHITECTURES, build_model  # noqa: E402


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """seer's tiny offline model, for its tokenizer."""
    from seer.testing.tiny_model import build_tiny_model

    return Path(build_tiny_model(tmp_path_factory.mktemp("tiny-llama")))


@pytest.fixture(scope="session")
def tokenizer(tiny_dir: Path) -> Any:
    """seer's tiny byte-level BPE tokenizer (pad token, chat template, pads on the left)."""
    return transformers.AutoTokenizer.from_pretrained(tiny_dir)


@pytest.fixture(scope="session")
def plain_tokenizer(tiny_dir: Path) -> Any:
    """The same tokenizer as GPT-2's comes: no pad token, no chat template, padding on the right."""
    tok = transformers.AutoTokenizer.from_pretrained(tiny_dir)
    tok.pad_token = None
    tok.chat_template = None
    tok.padding_side = "right"
    return tok


@pytest.fixture(scope="session", params=ARCHITECTURES)
def arch_model(request: pytest.FixtureRequest, tokenizer: Any) -> tuple[str, Any]:
    """``(architecture, model)`` for each architecture the toolkit must work on."""
    return request.param, build_model(request.param, len(tokenizer))

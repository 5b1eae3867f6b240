"""Regenerate the parts of the docs that are facts about the code, from the code itself.

    python scripts/gen_docs.py           rewrite the generated blocks in docs/*.md
    python scripts/gen_docs.py --check   exit 1 if any is out of date (nox -s docs, the tests)

Each block sits between ``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->``;
everything outside the markers is written by hand. Today: the config field tables, the GPU
catalogue and execution modes (docs/config.md), the environment variables the local provider
passes through (docs/providers.md), and the provider table of README.md and docs/index.md (what
each provider distribution can do, read from its registered provider class: a provider that lands
changes its row).
"""

from __future__ import annotations

import argparse
import enum
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel
from seer.config.fieldtext import default_text, type_text

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: The provider distributions in the order the table lists them: (provider name, distribution,
#: import package). ``local`` is built into seer-core.
PROVIDERS = [
    ("local", "seer-core", "seer"),
    ("docker", "seer-docker", "seer_docker"),
    ("ssh", "seer-ssh", "seer_ssh"),
    ("runpod", "seer-runpod", "seer_runpod"),
    ("slurm", "seer-slurm", "seer_slurm"),
    ("modal", "seer-modal", "seer_modal"),
]


def type_name(tp: Any) -> str:
    """A readable type; a union nested in it reads ``Union[...]``: no "|", which splits a table cell on
    some renderers, code span or not."""
    return type_text(tp, union=lambda parts: f"Union[{', '.join(parts)}]")


def constraints(field: Any) -> str:
    parts = []
    for meta in field.metadata:
        for attr, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if isinstance(meta, getattr(annotated_types, attr.capitalize())):
                parts.append(f"{symbol} {getattr(meta, attr)}")
    return ", ".join(parts)


def field_table(model: type[BaseModel], only: list[str] | None = None) -> str:
    rows = ["| field | type | default | what it is |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if only is not None and name not in only:
            continue
        annotation = field.annotation
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            kind = " or ".join(f"`{type_name(a)}`" for a in typing.get_args(annotation))
        else:
            kind = f"`{type_name(annotation)}`"
        limits = constraints(field)
        if limits:
            kind += f" ({limits})"
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | {kind} | {default_text(field, required='*required*')} | {description} |")
    return "\n".join(rows)


def blocks() -> dict[str, dict[str, str]]:
    """``{doc file name: {block name: markdown}}``."""
    from seer.config import (
        GPU_CATALOGUE,
        ExecutionMode,
        ExperimentConfig,
        ModelConfig,
        RepoConfig,
        SandboxConfig,
    )

    extra = [n for n in ExperimentConfig.model_fields if n not in SandboxConfig.model_fields]
    gpus = ["| name | what it is |", "|---|---|"] + [f"| `{k}` | {v} |" for k, v in GPU_CATALOGUE.items()]
    modes = ["| value | what it is |", "|---|---|"] + [
        f"| `{m.value}` | {_member_doc(ExecutionMode, m.name)} |" for m in ExecutionMode
    ]
    from seer.providers.local.provider import PASSTHROUGH

    passthrough = ", ".join(f"`{name}`" for name in PASSTHROUGH)
    return {
        "config.md": {
            "sandbox-config": field_table(SandboxConfig),
            "experiment-config": field_table(ExperimentConfig, only=extra),
            "model-config": field_table(ModelConfig),
            "repo-config": field_table(RepoConfig),
            "gpu-catalogue": "\n".join(gpus),
            "execution-modes": "\n".join(modes),
        },
        "providers.md": {"local-passthrough": passthrough},
        "index.md": {"provider-table": provider_table()},
        "../README.md": {"provider-table": provider_table()},
    }


def provider_table() -> str:
    """Provider x feature, from the code: a row is "yes" only where the distribution registers a
    provider of that name, and its cells are that provider's :class:`Capabilities`. Notebook
    sessions, interfaces over RPC and the model cache are core's, built on the provider primitives,
    so every provider that exists has them."""
    import importlib.util

    from seer import plugins

    registered = plugins.providers()
    rows = [
        "| provider | install | provider built | GPUs | snapshots | model cache | test kit |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, dist, package in PROVIDERS:
        install = "built in" if dist == "seer-core" else f'`pip install "seer[{name}]"`'
        kit = "yes" if importlib.util.find_spec(f"{package}.testing") is not None else "—"
        if package == "seer":
            kit = "`seer.testing` (conformance suite)"
        elif kit == "yes":
            kit = f"`{package}.testing`"
        if name not in registered:
            rows.append(f"| `{name}` | {install} | not yet | — | — | — | {kit} |")
            continue
        caps = plugins.get_provider_class(name).capabilities
        gpus = f"up to {caps.max_gpu_count}" if caps.gpu_types and caps.max_gpu_count else "no"
        cache = "shared volume" if caps.volumes else "client cache"
        rows.append(
            f"| `{name}` | {install} | yes | {gpus} | {'yes' if caps.snapshots else 'no'} | {cache} | {kit} |"
        )
    return "\n".join(rows)


def _member_doc(enum_cls: type[enum.Enum], name: str) -> str:
    """The ``#:`` or trailing ``#:`` comment of an enum member, read from its source."""
    import inspect

    source = inspect.getsource(enum_cls)
    match = re.search(rf"^\s*{name}\s*=.*?#:\s*(.+)$", source, re.MULTILINE)
    return match.group(1).strip() if match else ""


def render(doc: Path, text: str, generated: dict[str, str]) -> str:
    for name, body in generated.items():
        pattern = re.compile(
            rf"(<!-- BEGIN GENERATED: {re.escape(name)} -->\n).*?(<!-- END GENERATED: {re.escape(name)} -->)",
            re.DOTALL,
        )
        if not pattern.search(text):
            raise SystemExit(f"{doc}: no generated block {name!r} (add its BEGIN/END markers)")
        text = pattern.sub(lambda m, body=body: m.group(1) + body + "\n" + m.group(2), text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a generated block is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name, generated in blocks().items():
        doc = DOCS / name
        current = doc.read_text()
        fresh = render(doc, current, generated)
        if fresh == current:
            continue
        stale.append(doc)
        if not args.check:
            doc.write_text(fresh)
            print(f"updated {doc}")
    if args.check and stale:
        names = ", ".join(str(d) for d in stale)
        print(f"out of date with the code: {names}; run: python scripts/gen_docs.py", file=sys.stderr)
        return 1
    if not stale:
        print("generated docs are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())

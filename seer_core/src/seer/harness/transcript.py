"""The transcript of an agent run, part of the research record: every message, tool call (with
its arguments and timing) and tool result (clipped), and the final answer, as JSON lines
(``<run_id>.jsonl``) and as readable Markdown (``<run_id>.md``), written as the run goes, so a run
that is interrupted or crashes keeps what it did.

Secrets never reach either file: every value the run knows to be one (the MCP servers'
credentials, the environment's keys and tokens, ``secrets=`` given to ``run_agent``) is replaced
by ``[redacted]``, and so is anything after ``token=`` in a URL.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from seer.harness.messages import AgentMessage

__all__ = ["MAX_RESULT_CHARS", "REDACTED", "Redactor", "Transcript", "secret_values"]

#: A tool result or message longer than this keeps its start and end in the transcript.
MAX_RESULT_CHARS = 4000
REDACTED = "[redacted]"
#: Environment and MCP ``env`` names whose values are secrets.
_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|CREDENTIAL|AUTH)", re.I)
_URL_TOKEN = re.compile(r"((?:token|api_key|key|secret)=)[^&\s\"'<>]+", re.I)
#: Values shorter than this are not treated as secrets (they would redact ordinary words).
_MIN_SECRET = 6


def secret_values(
    mcp_servers: Mapping[str, Mapping[str, Any]], environ: Mapping[str, str] | None = None
) -> set[str]:
    """The secrets a run knows of: values of secret-named variables in the environment and in the
    MCP servers' ``env`` and ``headers``, and tokens in their URLs."""
    found: set[str] = set()
    env = os.environ if environ is None else environ
    found.update(v for k, v in env.items() if _SECRET_NAME.search(k))
    for config in mcp_servers.values():
        for key in ("env", "headers"):
            values = config.get(key) or {}
            for name, value in values.items():
                if not isinstance(value, str):
                    continue
                if _SECRET_NAME.search(name) or key == "headers":
                    found.add(value)
                found.update(m.group(0).split("=", 1)[1] for m in _URL_TOKEN.finditer(value))
        url = config.get("url")
        if isinstance(url, str):
            found.update(m.group(0).split("=", 1)[1] for m in _URL_TOKEN.finditer(url))
    return {v for v in found if len(v) >= _MIN_SECRET}


class Redactor:
    """Replaces known secret values, and URL tokens, in text and in JSON-like values."""

    def __init__(self, secrets: Iterable[str]):
        # longest first, so a secret containing another is replaced whole
        self.secrets = sorted({s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len, reverse=True)

    def text(self, value: str) -> str:
        """``value`` with every known secret and URL token replaced by ``[redacted]``."""
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return _URL_TOKEN.sub(lambda m: m.group(1) + REDACTED, value)

    def value(self, value: Any) -> Any:
        """A JSON-like value (strings, mappings, lists) redacted throughout."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


def clip(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """``text``, or its start and end with how much was cut between them."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[-(limit // 4) :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"


class Transcript:
    """Writes one run's ``.jsonl`` and ``.md`` under ``folder``, a line at a time."""

    def __init__(self, folder: Path, run_id: str, redactor: Redactor, header: dict[str, Any]):
        folder.mkdir(parents=True, exist_ok=True)
        self.jsonl_path = folder / f"{run_id}.jsonl"
        self.markdown_path = folder / f"{run_id}.md"
        self.redactor = redactor
        # "x": a run id is new; never overwrite a record
        self._jsonl: IO[str] | None = open(self.jsonl_path, "x", encoding="utf-8")  # noqa: SIM115
        self._md: IO[str] | None = open(self.markdown_path, "x", encoding="utf-8")  # noqa: SIM115
        self._started = time.monotonic()
        header = self.redactor.value({"kind": "run", "run_id": run_id, **header})
        self._write_json(header)
        self._write_md(_md_header(header))

    def add(self, message: AgentMessage) -> None:
        """Record ``message`` (redacted, its text clipped)."""
        data = message.to_dict()
        if "text" in data:
            data["text"] = clip(data["text"])
        data = self.redactor.value(data)
        self._write_json(data)
        self._write_md(_md_message(data, time.monotonic() - self._started))

    def close(self) -> None:
        """Close both files (what was written stays)."""
        for fh in (self._jsonl, self._md):
            if fh is not None:
                fh.close()
        self._jsonl = self._md = None

    def _write_json(self, data: dict[str, Any]) -> None:
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
            self._jsonl.flush()

    def _write_md(self, text: str) -> None:
        if self._md is not None:
            self._md.write(text)
            self._md.flush()


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}\n"


def _md_header(header: dict[str, Any]) -> str:
    lines = [f"# Agent run {header['run_id']}", ""]
    for key in ("runner", "model", "session", "started", "max_turns", "timeout", "mcp_servers", "skills"):
        if header.get(key) not in (None, "", []):
            value = header[key]
            shown = ", ".join(map(str, value)) if isinstance(value, list) else value
            lines.append(f"- **{key}**: {shown}")
    return "\n".join(lines) + "\n\n"


def _md_message(data: dict[str, Any], elapsed: float) -> str:
    kind, text = data["kind"], data.get("text", "")
    at = f"_{elapsed:.1f}s, turn {data.get('turn', 0)}_"
    if kind == "system":
        return f"## System prompt\n\n{_fence(text, 'markdown')}\n"
    if kind == "user":
        return f"## Task\n\n{text}\n\n"
    if kind == "assistant":
        return f"### Assistant ({at})\n\n{text or '_(tool calls only)_'}\n\n"
    if kind == "tool_call":
        args = json.dumps(data.get("arguments") or {}, indent=2, ensure_ascii=False)
        return f"**Tool call** `{data.get('tool')}` ({at})\n\n{_fence(args, 'json')}\n"
    if kind == "tool_result":
        took = f"{data['duration']:.2f}s" if "duration" in data else "?"
        flag = " (error)" if data.get("is_error") else ""
        return f"**Result{flag}** of `{data.get('tool')}` after {took}\n\n{_fence(text)}\n"
    return f"## Final ({data.get('stop_reason')}, {at})\n\n{text}\n"

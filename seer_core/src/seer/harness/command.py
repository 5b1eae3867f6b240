"""``seer agent run TASK_FILE [--setup SETUP]``: one agent run from the command line, for scripts.

The task is a text file (``-``: standard input). The setup is a YAML or JSON file of
``run_agent``'s arguments, every key optional; relative paths are taken from the file's folder::

    provider: openai          # the agent runner (default: $SEER_AGENT_RUNNER, else the first usable)
    model: gpt-4.1
    max_turns: 30
    timeout: 1800             # seconds, wall clock
    prompts: [methodology.md] # files whose text joins the system prompt
    mcp_servers: .mcp.json    # a {"mcpServers": ...} file, or configs written here
    skills: [skills/probe]    # skill folders
    notebook:                 # attach to a notebook session (what a setup script printed)
      session_id: ...
      jupyter_url: ...
    workspace_dir: ./work     # or: work in a local session in this directory
    outputs_dir: ./runs       # where the transcript goes

Each message is printed as it comes; the exit code is 0 for an answer, 3 when a limit or a cancel
ended the run, 1 when the agent client failed, 2 for a bad task or setup file, 130 on Ctrl-C (the
transcript is kept in every case). The last line printed is the transcript's path.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from seer.errors import ConfigError, ConfigProblem

__all__ = ["SETUP_KEYS", "load_setup", "run_from_files"]

SETUP_KEYS = (
    "provider",
    "model",
    "max_turns",
    "timeout",
    "prompts",
    "mcp_servers",
    "skills",
    "notebook",
    "workspace_dir",
    "outputs_dir",
)
#: ``seer agent run``'s exit code when a limit or a cancel ended the run.
EXIT_STOPPED = 3


def _read_task(task_file: str) -> str:
    if task_file == "-":
        return sys.stdin.read()
    path = Path(task_file).expanduser()
    if not path.is_file():
        raise ConfigError(
            [ConfigProblem("TASK_FILE", f"{task_file!r} is not a file")], title="Cannot run the agent"
        )
    return path.read_text(encoding="utf-8")


def load_setup(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """The setup file's keys as ``run_agent`` arguments, paths made absolute; a
    :class:`~seer.errors.ConfigError` naming the file and the key for anything wrong."""
    if path is None:
        return {}
    file = Path(path).expanduser()
    title = f"Invalid agent setup {str(file)!r}"
    if not file.is_file():
        raise ConfigError([ConfigProblem("setup", f"{str(file)!r} is not a file")], title=title)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(
            [ConfigProblem("setup", f"not YAML or JSON: {exc}", file=str(file))], title=title
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            [ConfigProblem("setup", "expected a mapping of settings", file=str(file))], title=title
        )
    unknown = sorted(set(map(str, data)) - set(SETUP_KEYS))
    if unknown:
        raise ConfigError(
            [
                ConfigProblem(k, f"unknown setting; the settings are {', '.join(SETUP_KEYS)}", file=str(file))
                for k in unknown
            ],
            title=title,
        )
    base = file.parent.absolute()

    def here(value: Any) -> Any:
        return str(base / Path(value).expanduser()) if isinstance(value, str) else value

    out = dict(data)
    if isinstance(out.get("prompts"), str):
        out["prompts"] = [out["prompts"]]
    if isinstance(out.get("prompts"), list):
        out["prompts"] = [Path(here(p)) if isinstance(p, str) else p for p in out["prompts"]]
    if isinstance(out.get("skills"), str):
        out["skills"] = [out["skills"]]
    if isinstance(out.get("skills"), list):
        out["skills"] = [here(s) for s in out["skills"]]
    if isinstance(out.get("mcp_servers"), str):
        mcp_file = Path(here(out["mcp_servers"]))
        try:
            out["mcp_servers"] = json.loads(mcp_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                [
                    ConfigProblem(
                        "mcp_servers", f"cannot read {str(mcp_file)!r} as JSON: {exc}", file=str(file)
                    )
                ],
                title=title,
            ) from None
    for key in ("workspace_dir", "outputs_dir"):
        if key in out:
            out[key] = here(out[key])
    return out


def _session(setup: dict[str, Any]) -> Any:
    notebook = setup.pop("notebook", None)
    workspace_dir = setup.pop("workspace_dir", None)
    if notebook is not None and workspace_dir is not None:
        raise ConfigError("setup: give `notebook` or `workspace_dir`, not both")
    if notebook is not None:
        if not isinstance(notebook, dict) or not {"session_id", "jupyter_url"} <= set(notebook):
            raise ConfigError("notebook: expected session_id and jupyter_url (what the setup script printed)")
        from seer.notebook.session import NotebookSession

        return NotebookSession.attach(notebook["jupyter_url"], notebook["session_id"])
    if workspace_dir is not None:
        from seer.sessions.workdir import create_local_session

        return create_local_session(workspace_dir=workspace_dir)
    return None


def run_from_files(task_file: str, setup_file: str | None, overrides: dict[str, Any]) -> int:
    """Run ``seer agent run``; returns its exit code."""
    from seer.harness.run import run_agent_sync

    task = _read_task(task_file)
    setup = load_setup(setup_file)
    setup.update({k: v for k, v in overrides.items() if v is not None})
    session = _session(setup)

    def show(message: Any) -> None:
        print(message, flush=True)

    run = run_agent_sync(task, session=session, on_message=show, **setup)
    print(f"transcript: {run.transcript_path}", flush=True)
    return 0 if run.final is not None and run.final.stop_reason == "answered" else EXIT_STOPPED

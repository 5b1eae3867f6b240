"""Turning what ``run_agent`` is given (a session, prompts, MCP configs, skills, limits) into the
:class:`~seer.harness.runner.AgentSetup` a runner gets, checking every argument first: a bad one is a
:class:`~seer.errors.ConfigError` naming it, before any agent client or MCP server starts.

What each kind of session contributes:

* a notebook session (:class:`~seer.notebook.NotebookSession`): its MCP server (``notebook``,
  ``session.mcp_config``), a prompt naming the session and its pre-loaded models, the skills of the
  workspaces set up in it; the transcript goes beside its notebook on the client;
* a CLI session: its shell MCP server (``shell``) and ``session.prompt``;
* a local session: the MCP servers its workspace carries, ``session.prompt``, its skills, and its
  directory as the agent's working directory, where the agent may use its client's own tools.
"""

from __future__ import annotations

import os
import secrets as _secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seer.errors import ConfigError, ConfigProblem
from seer.harness.runner import SkillInfo
from seer.outputs import DEFAULT_OUTPUTS_DIR

__all__ = ["DEFAULT_MAX_TURNS", "DEFAULT_TIMEOUT", "RUNS_DIR", "Prepared", "prepare"]

#: ``run_agent``'s default limits: model responses, and seconds for the whole run.
DEFAULT_MAX_TURNS = 50
DEFAULT_TIMEOUT = 3600.0
#: The folder of a session's record that transcripts go to.
RUNS_DIR = "agent-runs"


@dataclass
class Prepared:
    """What :func:`prepare` checked and gathered (the runner's setup is made from it)."""

    task: str
    system_prompt: str
    mcp_servers: dict[str, dict[str, Any]]
    skills: list[Any]  # seer.workspace.Skill
    cwd: Path | None
    local_tools: bool
    record_dir: Path
    session_label: str | None
    run_id: str


def _session_servers(session: Any) -> dict[str, Any]:
    """The session's MCP servers, named (``notebook``, ``shell``, or the workspace's names)."""
    config = getattr(session, "mcp_config", None)
    if not config:
        return {}
    if isinstance(config, Mapping) and ({"command", "url"} & set(config)):
        kind = (
            "notebook"
            if hasattr(session, "jupyter_url")
            else "shell"
            if hasattr(session, "cwd")
            else "session"
        )
        return {kind: dict(config)}
    return {str(k): dict(v) for k, v in dict(config).items()}


def _session_prompt(session: Any) -> str:
    prompt = getattr(session, "prompt", None)
    if isinstance(prompt, str) and prompt.strip():
        return prompt.strip()
    if hasattr(session, "jupyter_url"):  # a notebook session
        lines = [
            "# Your environment: a Jupyter notebook session",
            "",
            f"You work in notebook session `{session.session_id}` through the `notebook` MCP server's "
            f"tools: pass `session_id` `{session.session_id}`. Every cell you run is kept in the "
            "notebook, the record of your work.",
        ]
        info = getattr(session, "model_info_text", "")
        if info:
            lines += ["", info.strip()]
        return "\n".join(lines)
    return ""


def _session_skills(session: Any) -> list[Any]:
    workspaces = list(getattr(session, "workspaces", None) or [])
    if getattr(session, "workspace", None) is not None:
        workspaces.append(session.workspace)
    out: list[Any] = []
    for workspace in workspaces:
        out.extend(getattr(workspace, "all_skills", []))
    return out


def _record_dir(session: Any, outputs_dir: Any) -> Path:
    if outputs_dir is not None:
        return Path(outputs_dir).expanduser().absolute()
    if session is not None:
        sandbox = getattr(session, "sandbox", None)
        if sandbox is not None and hasattr(sandbox, "outputs_dir"):
            return Path(sandbox.outputs_dir) / RUNS_DIR
        local = getattr(session, "local_path", None)
        if local is not None:
            return Path(local).absolute().parent / RUNS_DIR
        name = getattr(session, "session_id", None) or getattr(session, "name", None)
        if isinstance(name, str) and name:
            base = Path(os.environ.get("SEER_OUTPUTS_DIR") or DEFAULT_OUTPUTS_DIR).expanduser().absolute()
            return base / name / RUNS_DIR
    base = Path(os.environ.get("SEER_OUTPUTS_DIR") or DEFAULT_OUTPUTS_DIR).expanduser().absolute()
    return base / RUNS_DIR


def prepare(
    *,
    task: Any,
    prompts: Any,
    session: Any,
    mcp_servers: Any,
    skills: Any,
    max_turns: Any,
    timeout: Any,
    outputs_dir: Any,
) -> Prepared:
    """Check ``run_agent``'s arguments and gather what the run needs; every problem is reported at
    once in one :class:`~seer.errors.ConfigError`."""
    from seer.workspace import Skill, Workspace

    problems: list[ConfigProblem] = []
    if not isinstance(task, str) or not task.strip():
        problems.append(ConfigProblem("task", f"expected the task as a non-empty string, got {task!r}"))
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        problems.append(ConfigProblem("max_turns", f"expected a positive whole number, got {max_turns!r}"))
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        problems.append(ConfigProblem("timeout", f"expected a positive number of seconds, got {timeout!r}"))

    prompt_parts: list[str] = []
    if session is not None:
        if not (hasattr(session, "mcp_config") or hasattr(session, "prompt")):
            problems.append(
                ConfigProblem(
                    "session",
                    f"expected a notebook, CLI or local session, got {type(session).__name__}",
                )
            )
        else:
            prompt_parts.append(_session_prompt(session))
    if isinstance(prompts, str | os.PathLike):
        prompts = [prompts]
    for i, prompt in enumerate(prompts or ()):
        if isinstance(prompt, os.PathLike):
            path = Path(prompt).expanduser()
            if not path.is_file():
                problems.append(ConfigProblem(f"prompts[{i}]", f"prompt file {str(path)!r} does not exist"))
                continue
            prompt_parts.append(path.read_text(encoding="utf-8").strip())
        elif isinstance(prompt, str):
            prompt_parts.append(prompt.strip())
        else:
            problems.append(
                ConfigProblem(
                    f"prompts[{i}]", f"expected prompt text or a path to a file, got {type(prompt).__name__}"
                )
            )

    servers: dict[str, dict[str, Any]] = {}
    given: list[Any] = []
    if session is not None and not problems:
        given.append(_session_servers(session))
    if isinstance(mcp_servers, Mapping):
        mcp_servers = [mcp_servers]
    if isinstance(mcp_servers, str) or not isinstance(mcp_servers, Sequence):
        problems.append(
            ConfigProblem("mcp_servers", f"expected a list of MCP server configs, got {mcp_servers!r}")
        )
    else:
        given.extend(mcp_servers)
    given = [g for g in given if g]
    if given:
        try:
            servers = Workspace(mcp_servers=given).mcp_servers
        except ConfigError as exc:
            problems.extend(exc.problems)

    found: list[Any] = _session_skills(session) if session is not None else []
    if isinstance(skills, Skill | str | os.PathLike):
        skills = [skills]
    for i, skill in enumerate(skills or ()):
        if isinstance(skill, Skill):
            found.append(skill)
        elif isinstance(skill, str | os.PathLike):
            try:
                found.append(Skill.from_dir(skill))
            except ConfigError as exc:
                problems.extend(ConfigProblem(f"skills[{i}]", p.message) for p in exc.problems)
        else:
            problems.append(
                ConfigProblem(f"skills[{i}]", f"expected a Skill or a skill folder, got {skill!r}")
            )
    by_name: dict[str, Any] = {}
    for skill in found:
        if skill.name in by_name and by_name[skill.name] != skill:
            problems.append(ConfigProblem("skills", f"two different skills are named {skill.name!r}"))
        by_name[skill.name] = skill

    if problems:
        raise ConfigError(problems, title="Cannot run the agent")

    local_dir = getattr(session, "workspace_dir", None) if session is not None else None
    label = None
    if session is not None:
        label = f"{type(session).__name__} {getattr(session, 'session_id', '')}".strip()
    return Prepared(
        task=task.strip(),
        system_prompt="\n\n".join(p for p in prompt_parts if p),
        mcp_servers=servers,
        skills=list(by_name.values()),
        cwd=Path(local_dir) if local_dir else None,
        local_tools=bool(local_dir),
        record_dir=_record_dir(session, outputs_dir),
        session_label=label,
        run_id=time.strftime("run-%Y%m%d-%H%M%S-") + _secrets.token_hex(3),
    )


def install_skills(skills: Sequence[Any], skills_dir: Path) -> dict[str, SkillInfo]:
    """Write each skill as ``<skills_dir>/<name>/SKILL.md`` (plus its files)."""
    skills_dir.mkdir(parents=True, exist_ok=True)
    return {
        skill.name: SkillInfo(skill.name, skill.description, Path(skill.install_into(skills_dir)))
        for skill in skills
    }


def skills_prompt(skills: Mapping[str, SkillInfo]) -> str:
    """The part of the system prompt that lists the skills."""
    if not skills:
        return ""
    lines = [
        "## Skills",
        "",
        "Skills you can load: each holds instructions for one kind of task. Load one before "
        "doing what it describes.",
        "",
    ]
    lines += [f"- **{s.name}**: {s.description}" for s in skills.values()]
    return "\n".join(lines)

"""The ``seer`` command line: start, list, use and stop sandboxes from a shell.

Results go to stdout (one JSON object, a JSON array, or a table); progress, warnings and errors go
to stderr, so ``seer up config.yaml | jq -r .sandbox_id`` works. Exit codes: 0 success, 1 an
operation failed, 2 bad usage or an invalid config, 130 interrupted; ``seer exec`` exits with the
command's own code (124 if it timed out).

Plugins add sub-commands through the ``seer_register_commands(cli)`` hook, called on the
:class:`typer.Typer` app that :func:`create_app` builds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import seer
from seer import plugins, state
from seer.config import ExperimentConfig
from seer.errors import (
    ConfigError,
    ExecTimeoutError,
    SandboxNotFoundError,
    SeerError,
    UnknownPluginError,
)
from seer.preflight import known_gpu_types, sandbox_id_providers
from seer.providers.base import DETAIL_LABEL, MachineInfo, MachineStatus

__all__ = ["create_app", "main"]

F = TypeVar("F", bound=Callable[..., Any])

#: Exit code for bad usage or an invalid config (click uses 2 for usage errors too).
EXIT_CONFIG = 2
#: Exit code of ``seer exec`` when the command ran past ``--timeout`` (as coreutils ``timeout``).
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130

_STATUS_STYLE = {
    MachineStatus.RUNNING: "green",
    MachineStatus.STARTING: "cyan",
    MachineStatus.TERMINATED: "dim",
    MachineStatus.EXPIRED: "yellow",
    MachineStatus.LOST: "red",
    MachineStatus.STOPPED: "magenta",
}


# --- output helpers ---------------------------------------------------------------------------
def _stdout() -> Console:
    # Made per call: tests (and CliRunner) swap sys.stdout between invocations.
    return Console(highlight=False, soft_wrap=False)


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _warn(message: str) -> None:
    _stderr().print(f"[yellow]warning:[/] {escape(message)}")


def _fail(message: str, code: int = 1) -> NoReturn:
    _stderr().print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data))


def _iso(timestamp: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 in UTC (None stays None)."""
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def _duration(seconds: float) -> str:
    """``42s``, ``5m 3s``, ``2h 10m``, ``6h``, ``3d 4h``: the two largest units, zeros dropped."""
    seconds = max(0, int(seconds))
    units = [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)]
    for i, (unit, size) in enumerate(units):
        if seconds >= size or unit == "s":
            big, rest = divmod(seconds, size)
            if unit == "s":
                return f"{big}s"
            small_unit, small_size = units[i + 1]
            small = rest // small_size
            return f"{big}{unit} {small}{small_unit}" if small else f"{big}{unit}"
    raise AssertionError("unreachable")


def _handle_errors(func: F) -> F:
    """Turn seer's errors into one line on stderr and an exit code, never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (ConfigError, UnknownPluginError) as exc:
            _fail(str(exc), EXIT_CONFIG)
        except SeerError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            _fail("interrupted", EXIT_INTERRUPTED)

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send whatever is written to stdout (by plugins, provider SDKs, child processes) to stderr
    while the block runs, so that stdout carries only the command's result."""
    saved: int | None = None
    try:
        out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # not real files (e.g. under CliRunner)
        out_fd = err_fd = -1
    if out_fd >= 0:
        sys.stdout.flush()
        saved = os.dup(out_fd)
        os.dup2(err_fd, out_fd)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            sys.stdout.flush()
            os.dup2(saved, out_fd)
            os.close(saved)


def _read_stdin() -> bytes:
    stream = sys.stdin
    buffer = getattr(stream, "buffer", None)
    return buffer.read() if buffer is not None else stream.read().encode()


# --- finding sandboxes ------------------------------------------------------------------------
def _all_machines() -> list[MachineInfo]:
    """Every sandbox every installed provider knows of. A provider whose listing fails, or one that
    cannot be used here (no credentials) while this home records a sandbox on it that has not
    ended, gets a warning on stderr; the others are still listed. A provider that is merely not set
    up (RunPod or Modal without credentials, never used from here) is no news: no warning."""
    found: list[MachineInfo] = []
    for name in plugins.providers():
        try:
            availability = plugins.get_provider_class(name).availability()
            if not availability.usable:
                if _recorded_on(name):
                    _warn(f"provider {name!r} not listed: {availability.reason or 'not usable here'}")
                continue
            found += plugins.get_provider(name).list()
        except Exception as exc:
            _warn(f"provider {name!r} not listed: {exc}")
    return sorted(found, key=lambda m: m.created_at)


def _recorded_on(provider: str) -> bool:
    """Whether this home records a sandbox on ``provider`` that has not ended."""
    for path in state.records_dir().glob("*.json"):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            record = state.read_json(path)
            if record.get("provider") == provider and "ended_at" not in record:
                return True
    return False


def _expire_records(machines: list[MachineInfo]) -> None:
    """Drop the tokens from the client records of listed sandboxes that have ended, and delete
    records past their time (:func:`seer.state.prune_records`)."""
    for m in machines:
        if not m.status.alive:
            state.end_record(m.id, m.status.value)
    state.prune_records()


def _machine_info(provider: str, sandbox_id: str) -> MachineInfo | None:
    with contextlib.suppress(Exception):
        for info in plugins.get_provider(provider).list():
            if info.id == sandbox_id:
                return info
    return None


def _info_json(info: MachineInfo) -> dict[str, Any]:
    return {
        "sandbox_id": info.id,
        "provider": info.provider,
        "name": info.name,
        "status": info.status.value,
        "created_at": _iso(info.created_at),
        "expires_at": _iso(info.expires_at),
        "labels": dict(info.labels),
    }


# --- commands ---------------------------------------------------------------------------------
@_handle_errors
def up(
    config_file: Annotated[
        Path,
        typer.Argument(metavar="CONFIG", help="Experiment config file (YAML or JSON).", show_default=False),
    ],
    name: Annotated[
        str | None, typer.Option("--name", "-n", help="Sandbox name (default: the config's `name`).")
    ] = None,
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider", "-p", help="Run on this provider instead of the config's (or $SEER_PROVIDER)."
        ),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Print no progress on stderr (as SEER_QUIET=1 does)."),
    ] = False,
) -> None:
    """Start a sandbox from a config file and print how to reach it.

    Prints one JSON object on stdout: `sandbox_id`, `provider`, `name`, `status`, `workdir`,
    `jupyter_url` (null unless a Jupyter server was started), `code_server_url` and
    `code_server_password` (null unless the config has `debug: true`) and `expires_at` (ISO 8601,
    UTC).
    Progress (each step, download progress) goes to stderr unless --quiet. The sandbox keeps
    running after this command exits, until `seer down` or its `timeout`.

    Exits 2 if the config is invalid (nothing is started), 1 if starting failed (what was
    made is torn down).
    """
    config = seer.load_config(config_file)
    if provider is not None:
        config.provider = provider
    sandbox = seer.Sandbox(config)
    with _stdout_to_stderr():
        sandbox.start(name=name, quiet=quiet)
    info = _machine_info(sandbox.provider, sandbox.sandbox_id)
    _print_json(
        {
            "sandbox_id": sandbox.sandbox_id,
            "provider": sandbox.provider,
            "name": sandbox.name,
            "status": sandbox.status.value,
            "workdir": sandbox.workdir,
            "jupyter_url": sandbox.jupyter_url,
            "code_server_url": sandbox.code_server_url,
            "code_server_password": sandbox.code_server_password,
            "expires_at": _iso(info.expires_at) if info else None,
        }
    )
    if not quiet:
        _stderr().print(
            f"[green]Sandbox {escape(sandbox.sandbox_id)} is running[/] on {escape(sandbox.provider)}. "
            f"Stop it with: seer down {escape(sandbox.sandbox_id)}"
        )


@_handle_errors
def ls(
    all_: Annotated[
        bool, typer.Option("--all", "-a", help="Include terminated, expired and lost sandboxes.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array instead of a table.")] = False,
) -> None:
    """List sandboxes on every installed provider (running ones unless --all).

    A sandbox whose client or supervisor died is shown as `lost` or `expired`, never as
    running; one whose `seer up` (or `Sandbox.start()`) has not finished is `starting`, and ends
    itself (`lost`) if that client dies first. Ended sandboxes are listed for a day. A provider may
    add a line of its own in a DETAIL column (slurm: the job's state, node, elapsed time and
    limit). With --json,
    prints an array of objects with `sandbox_id`, `provider`, `name`, `status`, `created_at`,
    `expires_at` (ISO 8601, UTC) and `labels`.
    """
    listed = _all_machines()
    _expire_records(listed)
    machines = [m for m in listed if all_ or m.status.alive]
    if as_json:
        _print_json([_info_json(m) for m in machines])
        return
    if not machines:
        _stderr().print("No sandboxes." if all_ else "No running sandboxes.")
        return
    now = time.time()
    table = Table(box=None, header_style="bold", pad_edge=False)
    # a provider's own line about a machine (a SLURM job's state, node, elapsed time and limit)
    details = any(m.labels.get(DETAIL_LABEL) for m in machines)
    for column in ("ID", "PROVIDER", "NAME", "STATUS", "AGE", "EXPIRES IN", *(["DETAIL"] if details else [])):
        table.add_column(column, no_wrap=column in ("ID", "STATUS"))
    for m in machines:
        if not m.status.alive:
            expires = "-"
        elif m.expires_at is None:
            expires = "never"
        else:
            expires = _duration(m.expires_at - now)
        table.add_row(
            escape(m.id),
            escape(m.provider),
            escape(m.name),
            f"[{_STATUS_STYLE.get(m.status, '')}]{m.status.value}[/]",
            _duration(now - m.created_at),
            expires,
            *([escape(m.labels.get(DETAIL_LABEL, ""))] if details else []),
        )
    _stdout().print(table)


@_handle_errors
def down(
    sandbox_ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="ID", help="Sandboxes to terminate.", show_default=False),
    ] = None,
    all_: Annotated[bool, typer.Option("--all", "-a", help="Terminate every running sandbox.")] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Terminate even if the notebooks and outputs cannot be copied out."),
    ] = False,
) -> None:
    """Terminate sandboxes: the ones named, or with --all every running one on every provider.

    First each sandbox's notebooks and outputs are copied to its client folder (the one fixed when
    it started: `$SEER_OUTPUTS_DIR/<id>/` or `./seer-outputs/<id>/`), and a line on stderr says
    where. If that copy fails the sandbox is left running and the error says why (exit 1);
    --force terminates it anyway.

    Idempotent: a sandbox that is already gone is reported, not an error. An id no provider
    knows is an error (exit 1), after the others were terminated.
    """
    if bool(sandbox_ids) == all_:
        _fail("name the sandboxes to terminate, or pass --all (not both)", EXIT_CONFIG)
    for sandbox_id in sandbox_ids or []:  # every id checked before any sandbox is touched
        sandbox_id_providers(sandbox_id, argument="ID")
    failed = False
    if all_:
        sandbox_ids = [m.id for m in _all_machines() if m.status.alive]
        if not sandbox_ids:
            _stderr().print("No running sandboxes.")
    for sandbox_id in sandbox_ids or []:
        try:
            sandbox = seer.Sandbox.attach(sandbox_id)
            status = sandbox.status
            if status.alive:
                sandbox.terminate(force=force)
                typer.echo(f"{sandbox_id}: terminated")
            else:
                # Already dead: no lifecycle hooks, but let the provider clear any remains.
                plugins.get_provider(sandbox.provider).terminate(sandbox_id)
                state.end_record(sandbox_id, status.value)
                typer.echo(f"{sandbox_id}: already {status.value}")
        except SandboxNotFoundError as exc:
            _stderr().print(f"[bold red]error:[/] {escape(str(exc))}")
            failed = True
        except SeerError as exc:
            _stderr().print(f"[bold red]error:[/] {sandbox_id}: {escape(str(exc))}")
            failed = True
    if failed:
        raise typer.Exit(1)


@_handle_errors
def exec_(
    sandbox_id: Annotated[str, typer.Argument(metavar="ID", help="The sandbox.", show_default=False)],
    command: Annotated[
        list[str],
        typer.Argument(
            metavar="CMD",
            help="The command. One argument runs through bash (pipes work); several are argv.",
            show_default=False,
        ),
    ],
    timeout: Annotated[
        float | None, typer.Option("--timeout", "-t", min=0, help="Kill the command after this many seconds.")
    ] = None,
    cwd: Annotated[
        str | None, typer.Option("--cwd", help="Working directory in the sandbox (default: its workdir).")
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", "-e", metavar="KEY=VALUE", help="Set a variable (repeatable)."),
    ] = None,
    stdin: Annotated[bool, typer.Option("--stdin", help="Feed this command's standard input to it.")] = False,
) -> None:
    """Run a command in a sandbox, streaming its output; exit with its exit code.

    Put `--` before the command so its own options are not taken for seer's:

        seer exec local-1a2b3c -- python -c "import torch; print(torch.cuda.is_available())"

        seer exec local-1a2b3c -- "nvidia-smi | head -5"

    Exits 124 if the command ran past --timeout (it is killed; its output so far is shown).
    """
    variables: dict[str, str] = {}
    for item in env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _fail(f"--env {item!r}: expected KEY=VALUE", EXIT_CONFIG)
        variables[key] = value
    data = _read_stdin() if stdin else None
    sandbox = seer.Sandbox.attach(sandbox_id)
    lock = threading.Lock()

    def on_output(stream: str, text: str) -> None:
        with lock:
            typer.echo(text, nl=False, err=stream == "stderr")

    cmd: str | list[str] = command[0] if len(command) == 1 else list(command)
    try:
        result = sandbox.machine.exec(
            cmd, timeout=timeout, env=variables or None, cwd=cwd, stdin=data, on_output=on_output
        )
    except ExecTimeoutError as exc:
        _fail(str(exc), EXIT_TIMEOUT)
    code = result.exit_code
    raise typer.Exit(128 - code if code < 0 else code)  # killed by signal N: 128 + N, as shells do


@_handle_errors
def logs(
    sandbox_id: Annotated[str, typer.Argument(metavar="ID", help="The sandbox.", show_default=False)],
    lines: Annotated[
        int | None, typer.Option("--lines", "-n", min=1, help="Show only the last N lines of each log.")
    ] = None,
    process: Annotated[
        str | None, typer.Option("--process", "-p", help="Show only this log (a background process's name).")
    ] = None,
) -> None:
    """Show a sandbox's logs: its background processes (Jupyter, the RPC server, ...) and
    whatever the provider keeps of its own (e.g. the local provider's supervisor and setup).

    With several logs, each starts with a `==> NAME <==` line.
    """
    machine = seer.Sandbox.attach(sandbox_id).machine
    names = [process] if process else machine.log_names()
    if not names:
        status = machine.status()
        hint = "" if status.alive else f" (the sandbox is {status.value}; name a log with --process)"
        _stderr().print(f"No logs found for {escape(sandbox_id)}{escape(hint)}.")
        return
    for i, log_name in enumerate(names):
        try:
            text = machine.process_log(log_name, lines=lines)
        except FileNotFoundError:
            if process:
                known = ", ".join(machine.log_names()) or "none found"
                _fail(f"sandbox {sandbox_id} has no log {log_name!r}; logs: {known}")
            continue
        if len(names) > 1:
            typer.echo(f"{'' if i == 0 else chr(10)}==> {log_name} <==")
        typer.echo(text, nl=not text.endswith("\n"))


def _capabilities_text(caps: Any) -> str:
    parts = []
    if caps.gpu_types:
        parts.append(f"GPUs: {len(caps.gpu_types)} types, up to {caps.max_gpu_count}")
    else:
        parts.append("CPU only")
    parts += [label for flag, label in ((caps.snapshots, "snapshots"), (caps.volumes, "volumes")) if flag]
    parts.append(f"ports: {caps.port_exposure}")
    if caps.max_lifetime:
        parts.append(f"max {_duration(caps.max_lifetime)}")
    return ", ".join(parts)


def _capabilities_json(caps: Any) -> dict[str, Any]:
    return {
        k: sorted(v) if isinstance(v, frozenset | set) else v for k, v in dataclasses.asdict(caps).items()
    }


def _plugins_report() -> dict[str, Any]:
    report: dict[str, Any] = {
        "plugins": [
            {
                "name": p.name,
                "distribution": p.distribution,
                "version": p.version,
                "builtin": p.builtin,
                "loaded": p.skipped is None,
                "skipped": p.skipped,
                "hooks": list(p.hooks),
            }
            for p in plugins.loaded_plugins()
        ],
        "providers": [],
    }
    for name, reg in plugins.providers().items():
        provider_cls = plugins.get_provider_class(name)
        try:
            availability = provider_cls.availability()
            usable, reason = availability.usable, availability.reason
        except Exception as exc:
            usable, reason = False, f"availability check failed: {type(exc).__name__}: {exc}"
        report["providers"].append(
            {
                "name": name,
                "plugin": reg.plugin,
                "distribution": reg.distribution,
                "usable": usable,
                "reason": reason or None,
                "description": provider_cls.description,
                "capabilities": _capabilities_json(provider_cls.capabilities),
            }
        )
    for key, registry in (
        ("execution_modes", plugins.execution_modes()),
        ("expose_modes", plugins.expose_modes()),
    ):
        report[key] = [
            {
                "name": name,
                "plugin": reg.plugin,
                "distribution": reg.distribution,
                "description": getattr(reg.cls, "description", ""),
            }
            for name, reg in registry.items()
        ]
    report["agent_runners"] = []
    for name, reg in plugins.agent_runners().items():
        try:
            availability = plugins.get_agent_runner(name).availability()
            usable, reason = availability.usable, availability.reason
        except Exception as exc:
            usable, reason = False, f"availability check failed: {type(exc).__name__}: {exc}"
        report["agent_runners"].append(
            {
                "name": name,
                "plugin": reg.plugin,
                "distribution": reg.distribution,
                "usable": usable,
                "reason": reason or None,
                "description": getattr(reg.cls, "description", ""),
            }
        )
    return report


@_handle_errors
def plugins_(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
) -> None:
    """Show what is installed: plugins (loaded or skipped, and why), providers (usable here or
    not, and why), execution modes, expose modes and agent runners (usable here or not).

    Plugins are found through the `seer` entry-point group; SEER_LOAD_PLUGINS and
    SEER_DISABLE_PLUGINS choose which load.
    """
    report = _plugins_report()
    if as_json:
        _print_json(report)
        return
    out = _stdout()

    def table(title: str, *columns: str) -> Table:
        t = Table(title=title, title_justify="left", title_style="bold", box=None, pad_edge=False)
        for column in columns:
            t.add_column(column, header_style="bold", overflow="fold")
        return t

    t = table("Plugins", "NAME", "DISTRIBUTION", "VERSION", "STATUS", "HOOKS")
    for p in report["plugins"]:
        status = "[green]loaded[/]" if p["loaded"] else f"[yellow]skipped[/] ({escape(p['skipped'])})"
        t.add_row(
            escape(p["name"]) + (" [dim](built-in)[/]" if p["builtin"] else ""),
            escape(p["distribution"]),
            escape(p["version"] or "?"),
            status,
            escape(", ".join(h.removeprefix("seer_") for h in p["hooks"])),
        )
    out.print(t)
    out.print()
    t = table("Providers", "NAME", "USABLE HERE", "FROM", "CAPABILITIES")
    for p in report["providers"]:
        usable = "[green]yes[/]" if p["usable"] else f"[red]no[/]: {escape(p['reason'] or 'unknown reason')}"
        caps = plugins.get_provider_class(p["name"]).capabilities
        t.add_row(escape(p["name"]), usable, escape(p["distribution"]), escape(_capabilities_text(caps)))
    out.print(t)
    for key, title in (("execution_modes", "Execution modes"), ("expose_modes", "Expose modes")):
        out.print()
        if not report[key]:
            out.print(f"[bold]{title}[/]: none installed")
            continue
        t = table(title, "NAME", "FROM", "DESCRIPTION")
        for m in report[key]:
            t.add_row(escape(m["name"]), escape(m["distribution"]), escape(m["description"]))
        out.print(t)
    out.print()
    if not report["agent_runners"]:
        out.print('[bold]Agent runners[/]: none installed (pip install "seer[claude]" or "seer[openai]")')
        return
    t = table("Agent runners", "NAME", "USABLE HERE", "FROM", "DESCRIPTION")
    for r in report["agent_runners"]:
        usable = "[green]yes[/]" if r["usable"] else f"[red]no[/]: {escape(r['reason'] or 'unknown reason')}"
        t.add_row(escape(r["name"]), usable, escape(r["distribution"]), escape(r["description"]))
    out.print(t)


def config_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a config file: :class:`~seer.config.ExperimentConfig`,
    plus the shorthands its validators accept (a model or repo as a bare string, a local file
    pair as ``{local, remote}``) and the GPU and provider names installed here as examples."""
    schema = ExperimentConfig.model_json_schema()
    props = schema.get("properties", {})
    for field, ref, shorthand in (
        ("models", "#/$defs/ModelConfig", "a Hugging Face repo id or local directory"),
        ("repos", "#/$defs/RepoConfig", "owner/repo, a git URL or a local path"),
    ):
        items = props.get(field, {}).get("items")
        if items == {"$ref": ref}:
            props[field]["items"] = {"anyOf": [{"type": "string", "description": shorthand}, items]}
    for field in ("local_files", "local_dirs"):
        items = props.get(field, {}).get("items")
        if isinstance(items, dict) and "prefixItems" in items:
            pair = {
                "type": "object",
                "properties": {"local": {"type": "string"}, "remote": {"type": "string"}},
                "required": ["local", "remote"],
                "additionalProperties": False,
            }
            props[field]["items"] = {"anyOf": [items, pair]}
    if "gpu" in props:
        props["gpu"]["examples"] = sorted(known_gpu_types())
    if "provider" in props:
        props["provider"]["examples"] = sorted(plugins.providers())
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


@_handle_errors
def schema(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file instead of stdout.", dir_okay=False),
    ] = None,
) -> None:
    """Print the JSON Schema of a config file, for editors' completion and checking.

    For example, with the YAML language server, write the schema to a file and start a config
    with `# yaml-language-server: $schema=seer-config.schema.json`.
    """
    text = json.dumps(config_schema(), indent=2) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return
    output.write_text(text)
    _stderr().print(f"Wrote {escape(str(output))}")


@_handle_errors
def skill_install(
    directory: Annotated[
        Path | None,
        typer.Argument(
            metavar="DIR",
            help="The skills folder (default: ./.claude/skills, where Claude Code finds a project's skills).",
            show_default=False,
            file_okay=False,
        ),
    ] = None,
) -> None:
    """Install seer's own agent skill: writes DIR/seer/SKILL.md (replacing an older one).

    The skill teaches an agent seer: setup scripts, attaching to notebook sessions through the
    notebook MCP server, CLI sessions, scoped sandboxes, GPUs, cleanup. Prints the file's
    absolute path.
    """
    from seer import guide as skill

    target = directory if directory is not None else Path(skill.DEFAULT_DIR)
    try:
        path = skill.install(target)
    except OSError as exc:
        _fail(f"cannot write the skill into {str(target)!r}: {exc.strerror or exc}")
    typer.echo(str(path.absolute()))


@_handle_errors
def skill_show() -> None:
    """Print seer's own agent skill (the SKILL.md that `seer skill install` writes)."""
    from seer import guide as skill

    typer.echo(skill.skill().skill_md, nl=False)


def _skill_app() -> typer.Typer:
    group = typer.Typer(
        name="skill",
        invoke_without_command=True,
        help="seer's own agent skill (SKILL.md): print it (`seer skill`, as `seer skill show`), or "
        "install it where your agent finds skills.",
    )

    @group.callback()
    def skill(ctx: typer.Context) -> None:
        """An agent told to run `seer skill` gets the guide itself, not this command's help."""
        if ctx.invoked_subcommand is None:
            skill_show()

    group.command("install")(skill_install)
    group.command("show")(skill_show)
    return group


@_handle_errors
def agent_run(
    task_file: Annotated[
        str,
        typer.Argument(metavar="TASK_FILE", help="The task, a text file ('-': stdin).", show_default=False),
    ],
    setup: Annotated[
        Path | None,
        typer.Option(
            "--setup", "-s", help="A YAML or JSON file of run_agent's settings.", show_default=False
        ),
    ] = None,
    provider: Annotated[
        str | None, typer.Option("--provider", "-p", help="The agent runner (claude, openai, ...).")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="The model to ask for.")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", help="The most model responses.")] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds the whole run may take (wall clock).")
    ] = None,
) -> None:
    """Run an agent on a task with the setup's session, MCP servers, prompts and skills; print each
    message, keep the transcript. Exit 0: answered; 3: stopped by a limit; 1: the agent failed."""
    from seer.harness.command import run_from_files

    overrides = {"provider": provider, "model": model, "max_turns": max_turns, "timeout": timeout}
    code = run_from_files(task_file, str(setup) if setup is not None else None, overrides)
    if code:
        raise typer.Exit(code)


def _agent_app() -> typer.Typer:
    group = typer.Typer(name="agent", no_args_is_help=True, help="Run an agent (seer.harness.run_agent).")
    group.command("run")(agent_run)
    return group


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"seer {seer.__version__}")
        raise typer.Exit()


class _StderrHandler(logging.Handler):
    """Log records to whatever ``sys.stderr`` is at the time (CliRunner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            sys.stderr.write(f"seer: {self.format(record)}\n")


def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Show the version and exit."),
    ] = False,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            show_default=False,
            help="Log what seer does to stderr (-vv: more).",
        ),
    ] = 0,
) -> None:
    """Ready sandboxes for interpretability research, on any installed provider.

    Start one from a config file with `seer up CONFIG`, work in it with `seer exec`, look at
    it with `seer ls` and `seer logs`, stop it with `seer down`. `seer plugins` shows which
    providers are usable here; `seer schema` gives editors the config file's schema.
    """
    if verbose:
        logger = logging.getLogger("seer")
        if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
            logger.addHandler(_StderrHandler())
        logger.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)


def create_app() -> typer.Typer:
    """Build the ``seer`` app: the core commands, then whatever plugins add through the
    ``seer_register_commands`` hook. A plugin that fails to load costs its commands (with a
    warning), not the whole CLI."""
    app = typer.Typer(
        name="seer",
        no_args_is_help=True,
        rich_markup_mode="markdown",
        context_settings={"help_option_names": ["-h", "--help"]},
        # A traceback's locals could hold secrets; never print them.
        pretty_exceptions_show_locals=False,
    )
    app.callback()(_root)
    app.command("up")(up)
    app.command("ls")(ls)
    app.command("down")(down)
    app.command("exec")(exec_)
    app.command("logs")(logs)
    app.command("plugins")(plugins_)
    app.command("schema")(schema)
    app.add_typer(_skill_app(), name="skill")
    app.add_typer(_agent_app(), name="agent")
    try:
        plugins.hook().seer_register_commands(cli=app)
    except Exception as exc:
        _warn(f"commands from plugins are not available: {exc}")
    return app


def main() -> None:
    """The ``seer`` console script."""
    try:
        app = create_app()
        app(prog_name="seer")
    except (ConfigError, UnknownPluginError) as exc:
        _stderr().print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(EXIT_CONFIG)
    except SeerError as exc:  # raised by a plugin's command
        _stderr().print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(1)


if __name__ == "__main__":
    main()

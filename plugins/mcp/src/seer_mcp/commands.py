"""``seer mcp ...``: start one of seer's MCP servers on stdio (each lives in its own module)."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.command("shell")
def shell(
    sandbox: str | None = typer.Option(
        None, "--sandbox", envvar="SEER_SHELL_SANDBOX_ID", help="The sandbox to work in."
    ),
    session: str | None = typer.Option(
        None,
        "--session",
        envvar="SEER_SHELL_SESSION_ID",
        help="The CLI session whose working directory and environment commands use.",
    ),
) -> None:
    """The shell MCP server (stdio): run_command, read_file, write_file and list_dir in a sandbox.

    `session.mcp_config` of a CLI session (`seer.execution.create_cli_session`) starts it with the
    sandbox and session set; without a sandbox, each tool call names one.
    """
    from seer_mcp.shell import serve

    serve(sandbox, session)


@app.command("notebook")
def notebook(
    session_id: str | None = typer.Option(
        None, "--session-id", envvar="SEER_SESSION_ID", help="A session to attach to on first use."
    ),
    jupyter_url: str | None = typer.Option(
        None,
        "--jupyter-url",
        envvar="SEER_JUPYTER_URL",
        help="The Jupyter server (with ?token=) of that session, or the server attach_to_session uses.",
        show_envvar=True,
    ),
) -> None:
    """The notebook MCP server (stdio): attach_to_session, execute_code, add_markdown, edit_cell,
    get_cell_result, list/interrupt/restart/shutdown_session and start_new_session (local kernel).

    `session.mcp_config` of a notebook session starts it with that session as the default.
    """
    import os

    from seer_mcp.notebook import main

    if session_id:
        os.environ["SEER_SESSION_ID"] = session_id
    if jupyter_url:
        os.environ["SEER_JUPYTER_URL"] = jupyter_url
    main([])

"""The ``seer`` command line: every command, its exit codes, plugin commands, and real runs of the
installed console script (a sandbox started by ``seer up`` outlives the process that started it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from seer import Sandbox, SandboxConfig, SeerError, cli, hookimpl, plugins
from seer.providers.base import Availability, MachineInfo, MachineStatus, Provider
from seer.providers.local.provider import LocalProvider
from typer.testing import CliRunner

pytestmark = pytest.mark.unit


@pytest.fixture
def run() -> Callable[..., Any]:
    """Invoke the CLI in-process: ``run("ls", "--json")``. A fresh app per call, as ``main()``
    builds it (so plugin commands registered during the test are picked up)."""
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Any:
        return runner.invoke(cli.create_app(), list(args), input=input, prog_name="seer")

    return invoke


@pytest.fixture
def sandboxes() -> Iterator[Callable[..., Sandbox]]:
    """Start local sandboxes through this; every one is terminated at the end."""
    started: list[Sandbox] = []

    def start(name: str = "cli-test", **config: Any) -> Sandbox:
        config.setdefault("timeout", 300)
        config.setdefault("execution_mode", "cli")
        sandbox = Sandbox(SandboxConfig(**config)).start(name=name)
        started.append(sandbox)
        return sandbox

    yield start
    for sandbox in started:
        sandbox.terminate()


def _running_ids() -> set[str]:
    return {m.id for m in LocalProvider().list() if m.status.alive}


def _write_config(directory: Path, text: str, name: str = "experiment.yaml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


# --- help, version, schema ----------------------------------------------------------------------
def test_version(run):
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"seer {__import__('seer').__version__}"


def test_help_documents_every_command(run):
    result = run("--help")
    assert result.exit_code == 0, result.output
    for command in ("up", "ls", "down", "exec", "logs", "plugins", "schema"):
        assert command in result.stdout
    exec_help = run("exec", "--help").stdout
    assert "--timeout" in exec_help and "--" in exec_help


def test_schema_is_a_json_schema_with_every_config_field(run):
    result = run("schema")
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert set(SandboxConfig.model_fields) | {"name"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False
    assert "local" in schema["properties"]["provider"]["examples"]
    assert "A100" in schema["properties"]["gpu"]["examples"]

    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    # What the loader accepts validates, shorthands included; a misspelt field does not.
    good = {
        "name": "exp",
        "gpu": None,
        "timeout": 120,
        "python_packages": ["numpy"],
        "models": ["google/gemma-2-2b", {"name": "org/adapter", "is_peft": True, "base_model": "org/base"}],
        "repos": ["owner/repo"],
        "local_files": [["a.txt", "/data/a.txt"], {"local": "b.txt", "remote": "b.txt"}],
    }
    assert list(validator.iter_errors(good)) == []
    assert [e.message for e in validator.iter_errors({"gpus": "A100"})] == [
        "Additional properties are not allowed ('gpus' was unexpected)"
    ]


def test_schema_output_file(run, tmp_path):
    target = tmp_path / "seer.schema.json"
    result = run("schema", "--output", str(target))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert json.loads(target.read_text())["$schema"].startswith("https://json-schema.org/")


# --- plugins ------------------------------------------------------------------------------------
def test_plugins_lists_the_local_provider_as_usable(run):
    result = run("plugins", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    by_name = {p["name"]: p for p in report["plugins"]}
    assert by_name["local"]["distribution"] == "seer-core"
    assert by_name["local"]["loaded"] and "seer_register_providers" in by_name["local"]["hooks"]
    local = next(p for p in report["providers"] if p["name"] == "local")
    assert local["usable"] is True and local["capabilities"]["snapshots"] is True
    assert {m["name"] for m in report["execution_modes"]} >= {"notebook", "cli", "local"}
    assert isinstance(report["expose_modes"], list)
    assert all({"name", "usable", "reason", "distribution"} <= set(r) for r in report["agent_runners"])

    table = run("plugins")
    assert table.exit_code == 0, table.output
    for heading in ("Plugins", "Providers", "Execution modes", "Expose modes"):
        assert heading in table.stdout
    assert "local" in table.stdout and "yes" in table.stdout


# A third-party plugin, as its entry-point module would be: a command, and two providers that
# cannot list (one unavailable here, one whose API fails).
class _UnavailableProvider(Provider):
    name = "clitest-unavailable"
    description = "needs credentials this machine lacks"

    @classmethod
    def availability(cls) -> Availability:
        return Availability(False, "no credentials (set CLITEST_TOKEN)")

    def create(self, spec):
        raise NotImplementedError

    def attach(self, machine_id):
        from seer.errors import SandboxNotFoundError

        raise SandboxNotFoundError(machine_id)

    def list(self) -> list[MachineInfo]:
        raise AssertionError("list() must not be called on an unavailable provider")

    def terminate(self, machine_id):
        pass


class _FailingProvider(_UnavailableProvider):
    name = "clitest-failing"

    @classmethod
    def availability(cls) -> Availability:
        return Availability(True)

    def list(self) -> list[MachineInfo]:
        raise RuntimeError("API returned 503")


def _plugin_module() -> types.ModuleType:
    module = types.ModuleType("seer_clitest_plugin")

    @hookimpl
    def seer_register_commands(cli: typer.Typer) -> None:
        @cli.command("hello")
        def hello(who: str = "world") -> None:
            """Say hello (added by a plugin)."""
            typer.echo(f"hello {who}")

        @cli.command("broken")
        def broken() -> None:
            """Fail the way seer fails."""
            raise SeerError("the plugin's operation failed")

    @hookimpl
    def seer_register_providers(register: Callable[..., None]) -> None:
        register(_UnavailableProvider)
        register(_FailingProvider)

    module.seer_register_commands = seer_register_commands  # type: ignore[attr-defined]
    module.seer_register_providers = seer_register_providers  # type: ignore[attr-defined]
    return module


@pytest.fixture
def test_plugin(monkeypatch, fresh_plugins) -> types.ModuleType:
    """Install ``_plugin_module()`` as if a distribution published it under the ``seer``
    entry-point group; plugins are reloaded before and after the test."""
    module = _plugin_module()
    entry_point = types.SimpleNamespace(
        name="clitest",
        dist=types.SimpleNamespace(name="seer-clitest", version="9.9.9"),
        load=lambda: module,
    )
    real = plugins.metadata.entry_points

    def entry_points(**kwargs: Any) -> Any:
        found = list(real(**kwargs))
        return [*found, entry_point] if kwargs.get("group") == plugins.ENTRY_POINT_GROUP else found

    monkeypatch.setattr(plugins.metadata, "entry_points", entry_points)
    plugins.reset()
    return module


def test_plugin_adds_a_command(run, test_plugin):
    result = run("--help")
    assert result.exit_code == 0 and "hello" in result.stdout
    result = run("hello", "--who", "seer")
    assert result.exit_code == 0, result.output
    assert result.stdout == "hello seer\n"


def test_plugins_shows_third_party_plugins_and_why_a_provider_is_unusable(run, test_plugin):
    report = json.loads(run("plugins", "--json").stdout)
    plugin = next(p for p in report["plugins"] if p["name"] == "clitest")
    assert (plugin["distribution"], plugin["version"], plugin["builtin"]) == ("seer-clitest", "9.9.9", False)
    assert set(plugin["hooks"]) == {"seer_register_commands", "seer_register_providers"}
    providers = {p["name"]: p for p in report["providers"]}
    assert providers["clitest-unavailable"]["usable"] is False
    assert "CLITEST_TOKEN" in providers["clitest-unavailable"]["reason"]
    assert providers["local"]["usable"] is True
    table = run("plugins").stdout
    assert "clitest-unavailable" in table and "CLITEST_TOKEN" in table


@pytest.mark.e2e
def test_ls_warns_about_providers_that_cannot_list_and_lists_the_others(run, test_plugin, sandboxes):
    sandbox = sandboxes()
    result = run("ls", "--json")
    assert result.exit_code == 0, result.output
    assert sandbox.sandbox_id in {m["sandbox_id"] for m in json.loads(result.stdout)}
    assert "clitest-failing" in result.stderr and "API returned 503" in result.stderr
    # A provider merely not set up here is no news...
    assert "clitest-unavailable" not in result.stderr
    # ... unless this home started a sandbox on it that has not ended: that one cannot be listed.
    from seer import state

    state.write_json(
        state.record_path("clitest-0123456789"),
        {"id": "clitest-0123456789", "provider": "clitest-unavailable"},
    )
    try:
        result = run("ls", "--json")
        assert "clitest-unavailable" in result.stderr and "CLITEST_TOKEN" in result.stderr
    finally:
        state.record_path("clitest-0123456789").unlink()


@pytest.mark.e2e
def test_unconfigured_runpod_and_modal_are_no_news_to_ls_plugins_and_logs(
    run, sandboxes, monkeypatch, tmp_path
) -> None:
    for name in ("RUNPOD_API_KEY", "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.modal.toml, no runpod config
    assert {"runpod", "modal"} <= set(plugins.providers())
    sandbox = sandboxes()
    for args in (["ls"], ["ls", "--all"], ["plugins"], ["logs", sandbox.sandbox_id]):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert "warning" not in result.stderr, (args, result.stderr)
        assert "RunPod" not in result.stderr and "Modal" not in result.stderr, (args, result.stderr)


def test_seer_skill_alone_prints_the_guide(run):
    shown = run("skill", "show")
    assert shown.exit_code == 0 and shown.stdout.startswith("---\nname: seer\n")
    alone = run("skill")
    assert alone.exit_code == 0, alone.output
    assert alone.stdout == shown.stdout


def test_a_failing_plugin_hook_costs_its_commands_not_the_cli(fresh_plugins, capsys):
    class Broken:
        @staticmethod
        @hookimpl
        def seer_register_commands(cli: typer.Typer) -> None:
            raise RuntimeError("plugin bug")

    broken = Broken()
    plugins.get_plugin_manager().register(broken, name="clitest-broken")
    try:
        app = cli.create_app()
        assert "plugin bug" in capsys.readouterr().err
        result = CliRunner().invoke(app, ["ls", "--json"])
        assert result.exit_code == 0, result.output
        assert isinstance(json.loads(result.stdout), list)
    finally:
        plugins.get_plugin_manager().unregister(broken)


def test_main_prints_a_plugin_commands_seer_error_without_traceback(test_plugin, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["seer", "broken"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "the plugin's operation failed" in err and "Traceback" not in err


# --- config errors, unknown sandboxes, usage ---------------------------------------------------
@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("timeout: 120\ngpu_count: 0\n", "gpu_count"),
        ("timeout: 120\npython_pakages: [numpy]\n", "python_pakages"),
        ("timeout: 120\nprovider: no-such-provider\n", "provider"),
    ],
)
def test_up_with_a_bad_config_exits_2_naming_the_field(run, tmp_path, text, field):
    before = _running_ids()
    result = run("up", str(_write_config(tmp_path, text)))
    assert result.exit_code == 2, result.output
    assert field in result.stderr and "experiment.yaml" in result.stderr
    assert result.stdout == ""
    assert _running_ids() == before


def test_up_with_a_missing_file_exits_2(run, tmp_path):
    result = run("up", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2 and "not found" in result.stderr


def test_up_with_an_unknown_provider_option_exits_2(run, tmp_path, monkeypatch, fresh_plugins):
    monkeypatch.setenv("SEER_DISABLE_PLUGINS", "modal")  # as if seer-modal were not installed
    from seer import plugins

    plugins.reset()
    result = run("up", str(_write_config(tmp_path, "timeout: 60\n")), "--provider", "modal")
    assert result.exit_code == 2
    assert "seer[modal]" in result.stderr


@pytest.mark.parametrize("command", [["down"], ["exec", "--", "true"], ["logs"]])
def test_an_unknown_sandbox_id_is_a_clear_error(run, command):
    args = [command[0], "local-0000000000", *command[1:]]
    result = run(*args)
    assert result.exit_code == 1, result.output
    assert "local-0000000000" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("command", [["down"], ["exec", "--", "true"], ["logs"]])
def test_a_malformed_sandbox_id_is_bad_usage(run, command):
    result = run(command[0], "local-doesnotexist", *command[1:])
    assert result.exit_code == 2, result.output
    assert "'local-doesnotexist' is not a valid sandbox id" in result.stderr


def test_down_needs_ids_or_all(run):
    assert run("down").exit_code == 2
    assert run("down", "x", "--all").exit_code == 2


def test_exec_rejects_a_malformed_env(run):
    result = run("exec", "local-x", "--env", "NOEQUALS", "--", "true")
    assert result.exit_code == 2 and "KEY=VALUE" in result.stderr


# --- sandboxes through the CLI ------------------------------------------------------------------
@pytest.mark.e2e
def test_ls_shows_running_sandboxes_and_all_shows_terminated_ones(run, sandboxes):
    alive, dead = sandboxes(name="alive-one"), sandboxes(name="dead-one")
    dead.terminate()
    table = run("ls")
    assert table.exit_code == 0, table.output
    assert alive.sandbox_id in table.stdout and "alive-one" in table.stdout and "running" in table.stdout
    assert dead.sandbox_id not in table.stdout
    everything = {m["sandbox_id"]: m for m in json.loads(run("ls", "--all", "--json").stdout)}
    assert everything[dead.sandbox_id]["status"] == "terminated"
    running = json.loads(run("ls", "--json").stdout)
    assert {m["sandbox_id"] for m in running} >= {alive.sandbox_id}
    assert all(m["status"] == "running" for m in running)
    entry = next(m for m in running if m["sandbox_id"] == alive.sandbox_id)
    assert entry["provider"] == "local" and entry["name"] == "alive-one" and entry["expires_at"]


@pytest.mark.e2e
def test_exec_streams_output_and_passes_the_exit_code_through(run, sandboxes):
    sandbox = sandboxes()
    sid = sandbox.sandbox_id
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(7)"
    result = run("exec", sid, "--", "python", "-c", code)
    assert result.exit_code == 7
    assert result.stdout == "out\n" and result.stderr == "err\n"

    sandbox.ensure_dir("sub")
    shell = run("exec", sid, "--env", "GREETING=hi", "--cwd", "sub", "--", "echo $GREETING | tr a-z A-Z; pwd")
    assert shell.exit_code == 0, shell.output
    assert shell.stdout == f"HI\n{sandbox.workdir}/sub\n"

    killed = run("exec", sid, "--", "kill -9 $$")  # killed by signal 9: 128 + 9, as shells report it
    assert killed.exit_code == 137

    piped = run("exec", sid, "--stdin", "--", "python", "-", input="print(6 * 7)\n")
    assert (piped.exit_code, piped.stdout) == (0, "42\n")


@pytest.mark.e2e
def test_exec_timeout_exits_124(run, sandboxes):
    sandbox = sandboxes()
    started = time.monotonic()
    result = run("exec", sandbox.sandbox_id, "--timeout", "1", "--", "echo started; sleep 30")
    assert result.exit_code == 124
    assert time.monotonic() - started < 15
    assert result.stdout == "started\n" and "timed out" in result.stderr


@pytest.mark.e2e
def test_exec_in_a_terminated_sandbox_fails_cleanly(run, sandboxes):
    sandbox = sandboxes()
    sandbox.terminate()
    result = run("exec", sandbox.sandbox_id, "--", "true")
    assert result.exit_code == 1 and "terminated" in result.stderr


@pytest.mark.e2e
def test_logs_shows_background_processes_and_the_providers_own(run, sandboxes):
    sandbox = sandboxes()
    sid = sandbox.sandbox_id
    sandbox.machine.start_process(["python", "-c", "print('line one'); print('line two')"], name="worker")
    deadline = time.monotonic() + 10
    while sandbox.machine.process_running("worker") and time.monotonic() < deadline:
        time.sleep(0.05)

    one = run("logs", sid, "--process", "worker")
    assert (one.exit_code, one.stdout) == (0, "line one\nline two\n")
    last = run("logs", sid, "-p", "worker", "--lines", "1")
    assert last.stdout == "line two\n"

    every = run("logs", sid)
    assert every.exit_code == 0, every.output
    assert "==> worker <==" in every.stdout and "line one" in every.stdout
    assert "==> supervisor <==" in every.stdout  # the local provider's own log

    missing = run("logs", sid, "-p", "nope")
    assert missing.exit_code == 1 and "worker" in missing.stderr

    # Logs outlive the sandbox (on the local provider), to show what happened in it.
    sandbox.terminate()
    after = run("logs", sid, "--process", "worker")
    assert (after.exit_code, after.stdout) == (0, "line one\nline two\n")


def test_durations_are_short():
    assert [cli._duration(s) for s in (0, 42, 303, 3600, 7830, 21600, 3 * 86400 + 4 * 3600 + 5)] == [
        "0s",
        "42s",
        "5m 3s",
        "1h",
        "2h 10m",
        "6h",
        "3d 4h",
    ]


@pytest.mark.e2e
def test_down_terminates_and_is_idempotent(run, sandboxes):
    first, second = sandboxes(name="first"), sandboxes(name="second")
    result = run("down", first.sandbox_id, second.sandbox_id)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{first.sandbox_id}: terminated",
        f"{second.sandbox_id}: terminated",
    ]
    assert first.status is MachineStatus.TERMINATED and second.status is MachineStatus.TERMINATED
    again = run("down", first.sandbox_id)
    assert (again.exit_code, again.stdout) == (0, f"{first.sandbox_id}: already terminated\n")


@pytest.mark.e2e
def test_down_reports_unknown_ids_after_terminating_the_others(run, sandboxes):
    sandbox = sandboxes()
    result = run("down", "local-0000000000", sandbox.sandbox_id)
    assert result.exit_code == 1
    assert "local-0000000000" in result.stderr
    assert sandbox.status is MachineStatus.TERMINATED


# --- the installed console script, for real -----------------------------------------------------
def _seer_command() -> list[str]:
    script = shutil.which("seer", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "seer"]


def _seer(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_seer_command(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
@pytest.mark.e2e
def test_console_script_up_exec_logs_down(tmp_path):
    config = _write_config(
        tmp_path, "name: cli-e2e\ngpu: null\ntimeout: 120\nexecution_mode: cli\npython_packages: [numpy]\n"
    )
    up = _seer("up", str(config))
    assert up.returncode == 0, up.stderr
    info = json.loads(up.stdout)  # nothing but the JSON object on stdout
    sid = info["sandbox_id"]
    try:
        assert set(info) == {
            "sandbox_id",
            "provider",
            "name",
            "status",
            "workdir",
            "jupyter_url",
            "code_server_url",
            "code_server_password",
            "expires_at",
        }
        assert (info["provider"], info["name"], info["status"]) == ("local", "cli-e2e", "running")
        assert info["jupyter_url"] is None and info["expires_at"]
        assert info["code_server_url"] is None and info["code_server_password"] is None  # no debug: true

        # `seer up` has exited; the sandbox has not.
        listed = {m["sandbox_id"]: m for m in json.loads(_seer("ls", "--json").stdout)}
        assert listed[sid]["status"] == "running"

        code = "import sys, numpy; print(numpy.__name__); sys.exit(3)"
        ran = _seer("exec", sid, "--", "python", "-c", code)
        assert (ran.returncode, ran.stdout) == (3, "numpy\n"), ran.stderr

        deadline = time.monotonic() + 30
        while True:  # the supervisor logs once it is up, which may be just after `seer up` returns
            logs = _seer("logs", sid)
            assert logs.returncode == 0, logs.stderr
            if "supervising" in logs.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "supervising" in logs.stdout

        down = _seer("down", sid)
        assert (down.returncode, down.stdout) == (0, f"{sid}: terminated\n"), down.stderr
        after = {m["sandbox_id"]: m for m in json.loads(_seer("ls", "--all", "--json").stdout)}
        assert after[sid]["status"] == "terminated"
        assert sid not in {m["sandbox_id"] for m in json.loads(_seer("ls", "--json").stdout)}
        assert _seer("down", sid).returncode == 0  # idempotent
    finally:
        LocalProvider().terminate(sid)


@pytest.mark.slow
@pytest.mark.e2e
def test_console_script_down_all(tmp_path, monkeypatch):
    # A SEER_HOME of its own, so --all cannot reach sandboxes other tests are using; and no docker
    # provider, whose sandboxes are found engine-wide by label, whatever the SEER_HOME.
    home = tmp_path / "home"
    env = {"SEER_HOME": str(home), "SEER_DISABLE_PLUGINS": "docker"}
    config = _write_config(tmp_path, "timeout: 120\nexecution_mode: cli\n")
    ids = []
    try:
        for _ in range(2):
            up = _seer("up", str(config), env=env)
            assert up.returncode == 0, up.stderr
            ids.append(json.loads(up.stdout)["sandbox_id"])
        down = _seer("down", "--all", env=env)
        assert down.returncode == 0, down.stderr
        assert sorted(down.stdout.splitlines()) == sorted(f"{i}: terminated" for i in ids)
        statuses = {
            m["sandbox_id"]: m["status"] for m in json.loads(_seer("ls", "-a", "--json", env=env).stdout)
        }
        assert statuses == dict.fromkeys(ids, "terminated")
        nothing = _seer("down", "--all", env=env)
        assert (nothing.returncode, nothing.stdout) == (0, "")
    finally:
        monkeypatch.setenv("SEER_HOME", str(home))
        for sid in ids:
            LocalProvider().terminate(sid)


@pytest.mark.e2e
def test_console_script_bad_config_exits_2_without_traceback(tmp_path):
    config = _write_config(tmp_path, "timeout: 120\ngpu_count: 0\n")
    result = _seer("up", str(config))
    assert result.returncode == 2
    assert result.stdout == ""
    assert "gpu_count" in result.stderr and "experiment.yaml:2" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.e2e
def test_python_dash_m_seer():
    result = subprocess.run(
        [sys.executable, "-m", "seer", "--version"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and result.stdout.startswith("seer ")


def test_ls_shows_a_providers_detail_column_only_when_one_gives_it(run, monkeypatch):
    from seer.providers.base import DETAIL_LABEL

    monkeypatch.setenv("COLUMNS", "160")  # the table is as wide as the terminal
    now = time.time()
    plain = MachineInfo("local-0123456789", "local", "plain", MachineStatus.RUNNING, now, now + 600)
    monkeypatch.setattr(cli, "_all_machines", lambda: [plain])
    assert "DETAIL" not in run("ls").stdout
    job = MachineInfo(
        "slurm-0123456789ab",
        "slurm",
        "job",
        MachineStatus.RUNNING,
        now,
        now + 600,
        {DETAIL_LABEL: "job 12 RUNNING on c1, 1:05 of 11:00"},
    )
    monkeypatch.setattr(cli, "_all_machines", lambda: [plain, job])
    out = run("ls").stdout
    assert "DETAIL" in out and "job 12 RUNNING on c1, 1:05 of 11:00" in out

"""Exec: exit codes, streams, env and secrets, cwd, stdin, streaming, timeouts that kill a whole
tree (and spare background processes), and ``exec_python``."""

from __future__ import annotations

import hashlib
import os
import secrets
import shlex
import time

import pytest

from seer.errors import (
    ExecError,
    ExecTimeoutError,
)
from seer.providers.base import ExecResult, MachineStatus
from seer.sandbox import Sandbox
from seer.testing.conformance.base import ConformanceBase
from seer.testing.conformance.helpers import (
    CLIENT_ONLY_NAME,
    ENV_NAME,
    ENV_VALUE,
    SECRET_NAME,
    unique_token,
    wait_for,
)


class ExecTests(ConformanceBase):
    """Exec: exit codes, streams, env and secrets, cwd, stdin, streaming, timeouts that kill a whole
    tree (and spare background processes), and ``exec_python``."""

    def test_exec_stdout(self, sandbox: Sandbox) -> None:
        result = sandbox.exec("echo hello", timeout=60)
        assert isinstance(result, ExecResult)
        assert (result.stdout, result.stderr, result.exit_code) == ("hello\n", "", 0)
        assert result.ok
        assert str(result) == "hello\n"

    def test_exec_stderr_is_separate(self, sandbox: Sandbox) -> None:
        result = sandbox.exec("echo out; echo err >&2; echo out2", timeout=60)
        assert result.stdout == "out\nout2\n"
        assert result.stderr == "err\n"

    def test_exec_exit_codes(self, sandbox: Sandbox) -> None:
        assert sandbox.exec("exit 3", timeout=60).exit_code == 3
        assert not sandbox.exec("exit 3", timeout=60).ok
        assert sandbox.exec("exit 255", timeout=60).exit_code == 255
        assert sandbox.exec(["false"], timeout=60).exit_code == 1
        assert sandbox.exec(["true"], timeout=60).exit_code == 0

    def test_exec_missing_command_is_127(self, sandbox: Sandbox) -> None:
        missing = f"no-such-command-{secrets.token_hex(3)}"
        as_string = sandbox.exec(missing, timeout=60)
        assert as_string.exit_code == 127
        assert missing in as_string.stderr
        as_argv = sandbox.exec([missing, "--flag"], timeout=60)
        assert as_argv.exit_code == 127, as_argv.output

    def test_exec_string_runs_through_bash(self, sandbox: Sandbox) -> None:
        result = sandbox.exec('[[ -n "$BASH_VERSION" ]] && echo "$((6 * 7))" | tr 4 x', timeout=60)
        assert result.stdout == "x2\n", result.output

    def test_exec_argv_is_not_through_a_shell(self, sandbox: Sandbox) -> None:
        args = ["a b", "$HOME", "*", "'q'", '"dq"', "x;y", "`id`", "$(id)", ""]
        result = sandbox.exec(["printf", "%s|", *args], timeout=60)
        assert result.stdout == "|".join(args) + "|", result.output

    def test_exec_unicode_and_undecodable_output(self, sandbox: Sandbox) -> None:
        assert sandbox.exec(r"printf 'h\303\251llo \342\234\223'", timeout=60).stdout == "héllo ✓"
        bad = sandbox.exec(r"printf 'ok\377\376end'", timeout=60)
        assert bad.exit_code == 0
        assert bad.stdout.startswith("ok") and bad.stdout.endswith("end")

    def test_exec_large_interleaved_output(self, sandbox: Sandbox) -> None:
        code = (
            "import sys\nfor _ in range(2000):\n"
            "    sys.stdout.write('o' * 999 + '\\n'); sys.stderr.write('e' * 999 + '\\n')\n"
        )
        result = sandbox.exec([sandbox.machine.python, "-c", code], timeout=120)
        assert result.exit_code == 0, result.stderr[-2000:]
        assert result.stdout == ("o" * 999 + "\n") * 2000
        assert result.stderr == ("e" * 999 + "\n") * 2000

    def test_config_env_and_secrets_visible(self, sandbox: Sandbox, secret_value: str) -> None:
        assert sandbox.exec(f"echo ${ENV_NAME}", timeout=60).stdout == f"{ENV_VALUE}\n"
        assert sandbox.exec(["printenv", ENV_NAME], timeout=60).stdout == f"{ENV_VALUE}\n"
        assert sandbox.exec(f'printf %s "${SECRET_NAME}"', timeout=60).stdout == secret_value
        # the client's other variables stay out
        leaked = sandbox.exec(["printenv", CLIENT_ONLY_NAME], timeout=60)
        assert leaked.exit_code != 0, f"the client's {CLIENT_ONLY_NAME} crossed into the sandbox"

    def test_exec_env_argument(self, sandbox: Sandbox) -> None:
        result = sandbox.exec(
            f'echo "$SEER_CONFORMANCE_FOO:${ENV_NAME}"', env={"SEER_CONFORMANCE_FOO": "bar baz"}, timeout=60
        )
        assert result.stdout == f"bar baz:{ENV_VALUE}\n"
        # an argv command still finds programs on PATH when env= is given
        assert (
            sandbox.exec(
                ["printenv", "SEER_CONFORMANCE_FOO"], env={"SEER_CONFORMANCE_FOO": "1"}, timeout=60
            ).stdout
            == "1\n"
        )
        over = sandbox.exec(["printenv", ENV_NAME], env={ENV_NAME: "overridden"}, timeout=60)
        assert over.stdout == "overridden\n"
        # env= applies to that one command only
        assert sandbox.exec(["printenv", ENV_NAME], timeout=60).stdout == f"{ENV_VALUE}\n"
        assert sandbox.exec(["printenv", "SEER_CONFORMANCE_FOO"], timeout=60).exit_code != 0

    def test_exec_cwd(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.write_file(f"{scratch}/where/here.txt", "marker")
        # the default cwd is the workdir
        assert sandbox.exec(f"cat {scratch}/where/here.txt", timeout=60).stdout == "marker"
        assert sandbox.exec("cat here.txt", cwd=f"{scratch}/where", timeout=60).stdout == "marker"
        absolute = sandbox.machine.resolve(f"{scratch}/where")
        assert sandbox.exec(["cat", "here.txt"], cwd=absolute, timeout=60).stdout == "marker"

    def test_exec_stdin(self, sandbox: Sandbox) -> None:
        machine = sandbox.machine
        assert machine.exec(["cat"], stdin=b"line1\nline2\n", timeout=60).stdout == "line1\nline2\n"
        data = bytes(range(256)) * 4096 + os.urandom(3 * 1024 * 1024)
        digest = "import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"
        result = machine.exec([machine.python, "-c", digest], stdin=data, timeout=120)
        assert result.stdout.strip() == hashlib.sha256(data).hexdigest(), result.stderr
        # without stdin, a command reading it sees end-of-file at once rather than hanging
        assert machine.exec(["cat"], timeout=30).stdout == ""

    def test_exec_streams_output(self, sandbox: Sandbox) -> None:
        seen: list[tuple[float, str, str]] = []
        started = time.monotonic()
        result = sandbox.exec(
            "echo first; sleep 1; echo second; echo err >&2; sleep 0.5; echo third",
            on_output=lambda stream, text: seen.append((time.monotonic(), stream, text)),
            timeout=60,
        )
        elapsed = time.monotonic() - started
        assert result.stdout == "first\nsecond\nthird\n"
        assert "".join(t for _, s, t in seen if s == "stdout") == result.stdout
        assert "".join(t for _, s, t in seen if s == "stderr") == result.stderr == "err\n"
        first = next(at for at, _, text in seen if "first" in text)
        assert first - started < elapsed - 0.75, "on_output saw nothing until the command ended"

    def test_exec_check_raises(self, sandbox: Sandbox) -> None:
        with pytest.raises(ExecError) as info:
            sandbox.exec("echo out; echo oops >&2; exit 4", check=True, timeout=60)
        err = info.value
        assert err.exit_code == 4
        assert err.stdout == "out\n" and err.stderr == "oops\n"
        assert "exit 4" in err.command
        assert sandbox.exec("echo fine", check=True, timeout=60).stdout == "fine\n"
        with pytest.raises(ExecError):
            sandbox.exec(["false"], timeout=60).check()

    def test_exec_timeout_kills_command_and_children(self, sandbox: Sandbox) -> None:
        token = unique_token()
        py = shlex.quote(sandbox.machine.python)
        command = (
            f"echo partial-out; echo partial-err >&2; "
            f"{py} -c 'import time; time.sleep(600)' {token} & sleep 600; wait"
        )
        started = time.monotonic()
        with pytest.raises(ExecTimeoutError) as info:
            sandbox.exec(command, timeout=2)
        elapsed = time.monotonic() - started
        err = info.value
        assert isinstance(err, TimeoutError)
        assert err.timeout == 2
        assert "partial-out" in err.stdout
        assert "partial-err" in err.stderr
        assert elapsed < 30, f"the timeout of 2s took {elapsed:.1f}s to fire"
        wait_for(
            lambda: not self.live_in_sandbox(sandbox, token),
            timeout=15,
            what="the timed-out command's child to be killed",
        )
        assert sandbox.exec("echo still-usable", timeout=60).stdout == "still-usable\n"

    def test_exec_argv_timeout(self, sandbox: Sandbox) -> None:
        with pytest.raises(ExecTimeoutError):
            sandbox.exec(["sleep", "60"], timeout=1)

    def test_exec_waits_for_a_command_that_closed_its_output(self, sandbox: Sandbox) -> None:
        # the output ends long before the command does: its exit code (and deadline) still count
        result = sandbox.exec("echo early; exec >&- 2>&-; sleep 3; exit 5", timeout=60)
        assert (result.stdout, result.exit_code) == ("early\n", 5)
        with pytest.raises(ExecTimeoutError) as info:
            sandbox.exec("echo early; exec >&- 2>&-; sleep 60", timeout=2)
        assert info.value.stdout == "early\n"

    def test_exec_on_output_error_stops_the_command(self, sandbox: Sandbox) -> None:
        token = unique_token()
        py = shlex.quote(sandbox.machine.python)

        class Enough(Exception):
            pass

        def on_output(stream: str, text: str) -> None:
            if "started" in text:
                raise Enough

        started = time.monotonic()
        with pytest.raises(Enough):
            sandbox.machine.exec(
                f"echo started; {py} -c 'import time; time.sleep(600)' {token}",
                on_output=on_output,
                timeout=20,
            )
        assert time.monotonic() - started < 15, "exec went on after on_output raised"
        wait_for(
            lambda: not self.live_in_sandbox(sandbox, token),
            timeout=15,
            what="the command whose on_output raised to be killed",
        )

    def test_exec_timeout_spares_background_processes(self, sandbox: Sandbox) -> None:
        machine = sandbox.machine
        token = unique_token()
        name = f"survivor-{token}"
        machine.start_process([machine.python, "-c", "import time; time.sleep(600)", token], name=name)
        try:
            with pytest.raises(ExecTimeoutError):
                machine.exec(["sleep", "60"], timeout=1)
            # a background process outlives the exec that started it and the timeout of another
            assert machine.process_running(name)
            assert self.live_in_sandbox(sandbox, token)
            assert machine.status() is MachineStatus.RUNNING
            assert sandbox.exec("echo still-usable", timeout=60).stdout == "still-usable\n"
        finally:
            machine.stop_process(name, grace=2)
        assert not machine.process_running(name)
        assert name in machine.log_names()

    def test_exec_python(self, sandbox: Sandbox) -> None:
        code = f"import os, sys\nprint(os.environ[{ENV_NAME!r}])\nprint('to-stderr', file=sys.stderr)\n"
        result = sandbox.exec_python(code, timeout=60)
        assert (result.stdout, result.stderr, result.exit_code) == (f"{ENV_VALUE}\n", "to-stderr\n", 0)
        assert sandbox.exec_python("raise SystemExit(5)", timeout=60).exit_code == 5
        crash = sandbox.exec_python("1 / 0", timeout=60)
        assert crash.exit_code == 1 and "ZeroDivisionError" in crash.stderr
        with pytest.raises(ExecError):
            sandbox.exec_python("raise SystemExit(2)", check=True, timeout=60)

    def test_exec_python_large_source(self, sandbox: Sandbox) -> None:
        code = "x = '" + "a" * 1_000_000 + "'\nprint(len(x))\n"
        assert sandbox.exec_python(code, timeout=120).stdout == "1000000\n"

    def test_exec_python_timeout(self, sandbox: Sandbox) -> None:
        with pytest.raises(ExecTimeoutError):
            sandbox.exec_python("import time; time.sleep(60)", timeout=1)

    def test_python_has_seer_runtime(self, sandbox: Sandbox) -> None:
        import seer

        result = sandbox.exec_python("import seer; print(seer.__version__)", timeout=120)
        assert result.stdout.strip() == seer.__version__, result.output

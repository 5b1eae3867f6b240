"""What the ssh provider does beyond the contract, on a real sshd: a lifetime held on the host
with no client, the remote ledger found from a fresh ``SEER_HOME``, the shared model cache and
environments, strict host keys, dropped connections, and clear errors before anything is made."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _progress_kit import RecordingProgress
from _ssh_kit import Box
from seer import Sandbox
from seer.errors import ConfigError, SandboxError
from seer.providers.base import MachineStatus
from seer.testing.conformance import wait_for
from seer_ssh.connection import ConnectionLost
from seer_ssh.provider import SshProvider

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _remote_sandboxes(box: Box) -> list[str]:
    """The sandbox folders on the host (ended ones keep their record)."""
    out = box.host.exec_as_root("ls /home/seer/.seer/sandboxes 2>/dev/null || true").stdout
    return sorted(out.split())


def _with_token(box: Box, token: str) -> list[tuple[int, str]]:
    return [(pid, cmd) for pid, cmd in box.host.user_processes() if token in cmd]


# --- must show: clear errors before anything is made -------------------------------------------
def test_unknown_host_key_is_refused_saying_how_to_accept_it(box: Box, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    before = _remote_sandboxes(box)
    with pytest.raises(ConfigError) as info:
        Sandbox(box.config(provider_options={"known_hosts": str(empty)})).start()
    assert info.value.fields == ["provider_options.host"]
    message = str(info.value)
    assert "not in" in message and "known_hosts is strict" in message
    assert f"ssh-keyscan -p {box.host.port} 127.0.0.1 >> {empty}" in message
    assert "SHA256:" in message and "host_key_policy='accept-new'" in message
    assert _remote_sandboxes(box) == before


def test_changed_host_key_is_refused(tmp_path: Path) -> None:
    from seer_ssh.testing import SshHost

    with SshHost() as host:
        box = Box(host, tmp_path)
        old = host.known_hosts_line
        host.rotate_host_key()
        with pytest.raises(ConfigError) as info:
            Sandbox(box.config()).start()
        message = str(info.value)
        assert info.value.fields == ["provider_options.host"]
        assert "CHANGED" in message and "ssh-keygen -R" in message, message
        assert old.split()[-1] not in message  # fingerprints, not keys
        assert host.exec_as_root("test -e /home/seer/.seer").exit_code != 0, "nothing was made"


def test_accept_new_adds_an_unknown_key_and_then_holds_to_it(box: Box, tmp_path: Path) -> None:
    known = tmp_path / "kh"
    config = box.config(provider_options={"known_hosts": str(known), "host_key_policy": "accept-new"})
    assert SshProvider.check_config(config) == []
    assert box.host.host_key_line.split()[1] in known.read_text()


def test_unreachable_host_is_a_clear_error(box: Box) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError) as info:
        Sandbox(box.config(provider_options={"port": port, "connect_timeout": 5})).start()
    assert info.value.fields == ["provider_options.host"]
    assert f"could not connect to seer@127.0.0.1:{port}" in str(info.value)


def test_refused_login_is_a_clear_error(box: Box, tmp_path: Path) -> None:
    from seer_ssh.testing.host import new_ed25519_key

    private, _public = new_ed25519_key()
    stranger = tmp_path / "stranger"
    stranger.write_text(private)
    stranger.chmod(0o600)
    with pytest.raises(ConfigError) as info:
        Sandbox(box.config(provider_options={"key_file": str(stranger)})).start()
    assert "could not log into seer@127.0.0.1" in str(info.value)


def test_no_gpu_on_the_host_is_refused_before_anything_is_made(box: Box) -> None:
    before = _remote_sandboxes(box)
    with pytest.raises(ConfigError) as info:
        Sandbox(box.config(gpu="A100")).start()
    assert info.value.fields == ["gpu"]
    assert "has no NVIDIA GPU (nvidia-smi is not installed there)" in str(info.value)
    assert _remote_sandboxes(box) == before


def test_hidden_models_are_refused_unless_the_config_accepts_that_they_are_not_isolated(box: Box) -> None:
    """Every sandbox on an ssh host runs as the login user, who can read the shared model cache
    (and other sandboxes): a hidden model's identity cannot be kept there, so it is refused
    before anything is made, naming why and the way out."""
    models = [{"name": "org/visible"}, {"name": "org/secret", "hidden": True, "var_name": "secret"}]
    before = _remote_sandboxes(box)
    with pytest.raises(ConfigError) as info:
        Sandbox(box.config(models=models)).start()
    assert info.value.fields == ["models[1].hidden"]
    message = str(info.value)
    assert "cannot hide a model's identity" in message and "hf-hub" in message
    assert "allow_unisolated_hidden_models=True" in message and "docker" in message
    assert _remote_sandboxes(box) == before
    accepted = box.config(models=models, provider_options={"allow_unisolated_hidden_models": True})
    assert SshProvider.check_config(accepted) == []
    assert not SshProvider.capabilities.hides_models  # so core warns when it runs anyway


def test_missing_options_are_named(box: Box) -> None:
    with pytest.raises(ConfigError) as info:
        Sandbox(box.config(provider_options={"port": 0, "base_dir": "relative"})).start()
    assert sorted(info.value.fields) == ["provider_options.base_dir", "provider_options.port"]


def test_a_host_named_in_the_hosts_file(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEER_SSH_HOSTS_FILE", str(box.hosts_file))
    config = box.config()
    config = config.model_copy(update={"provider_options": {"host": "box"}})
    options = SshProvider().parse_options(config)
    assert (options.port, options.key_file) == (box.host.port, str(box.host.key_path))
    assert SshProvider.check_config(config) == []


# --- must show: a dropped connection mid-exec ----------------------------------------------------
@pytest.fixture(scope="module")
def sandbox(box: Box) -> Iterator[Sandbox]:
    sb = Sandbox(box.config(timeout=600)).start(name="ssh-provider")
    try:
        yield sb
    finally:
        sb.terminate()


def test_dropped_connection_during_exec_is_a_clear_error_and_leaves_no_process(
    box: Box, sandbox: Sandbox
) -> None:
    token = f"drop{secrets.token_hex(4)}"
    py = sandbox.machine.python
    timer = threading.Timer(1.5, box.host.drop_connections)
    timer.start()
    started = time.monotonic()
    with pytest.raises(ConnectionLost) as info:
        sandbox.exec(f"echo going; {py} -c 'import time; time.sleep(600)' {token}", timeout=120)
    timer.join()
    assert time.monotonic() - started < 30
    message = str(info.value)
    assert "dropped while sandbox" in message and sandbox.sandbox_id in message
    assert isinstance(info.value, SandboxError)
    # the command and its child were killed over a new connection: nothing stray on the host
    wait_for(
        lambda: not _with_token(box, token),
        timeout=15,
        what="the dropped command's processes to be killed",
        interval=0.25,
    )
    assert sandbox.exec("echo reconnected", timeout=60).stdout == "reconnected\n"
    assert sandbox.status is MachineStatus.RUNNING


def test_dropped_connection_during_an_upload_is_connection_lost_and_leaves_no_partial_file(
    box: Box, sandbox: Sandbox
) -> None:
    workdir = sandbox.machine.workdir
    partial = f"{workdir}/upload.bin.seer-tmp"

    def drop_once_the_upload_began() -> None:
        # on the host itself: wait (bounded) for the partial file, then drop every connection
        box.host.exec_as_root(f"for i in $(seq 2000); do [ -e {partial} ] && break; sleep 0.01; done")
        box.host.drop_connections()

    dropper = threading.Thread(target=drop_once_the_upload_began)
    dropper.start()
    try:
        with pytest.raises(ConnectionLost) as info:
            sandbox.write_file("upload.bin", os.urandom(128 << 20))
    finally:
        dropper.join()
    message = str(info.value)
    assert "dropped while a file was written" in message and sandbox.sandbox_id in message
    assert "upload.bin" in message
    listing = box.host.exec_as_root(f"ls -a {workdir}").check().stdout.split()
    assert "upload.bin.seer-tmp" not in listing and "upload.bin" not in listing, listing
    # the next upload reconnects
    sandbox.write_file("upload.bin", b"again")
    assert sandbox.read_bytes("upload.bin") == b"again"


def test_sandboxes_on_one_host_share_the_login_user_as_the_docs_say(
    box: Box, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit docs/security.md states: one sandbox's agent reads another's secrets and the
    shared model cache (hence hidden models are refused on ssh, above)."""
    value = f"s3cret-{secrets.token_hex(4)}"
    monkeypatch.setenv("SEER_TEST_SECRET", value)
    with Sandbox(box.config(timeout=300, secrets=["SEER_TEST_SECRET"])).start(name="neighbour") as other:
        env_file = other.machine.env_file
        assert value in sandbox.exec(["cat", env_file], check=True).stdout
    assert sandbox.exec(["ls", sandbox.machine.model_cache_dir()]).ok


def test_services_stay_on_the_remote_loopback(box: Box, sandbox: Sandbox) -> None:
    """A forwarded port's connections reach the service from sshd: they travel over SSH."""
    import socket
    import urllib.request

    code = "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\nprint(s.getsockname()[1])"
    port = int(sandbox.exec_python(code, check=True).stdout)
    sandbox.write_file("www/ping.txt", "pong")
    m = sandbox.machine
    m.start_process([m.python, "-m", "http.server", str(port), "--bind", "127.0.0.1"], name="www", cwd="www")
    try:
        url = m.expose_port(port)
        assert url.startswith("http://127.0.0.1:") and not url.endswith(f":{port}")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

        def get() -> bytes | None:
            try:
                with opener.open(f"{url}/ping.txt", timeout=5) as resp:
                    return resp.read()
            except OSError:
                return None

        assert wait_for(get, timeout=30, what="the forwarded server", interval=0.25) == b"pong"
        # a connection kept open (half a request): on the host, its client end is sshd's
        local = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", local), timeout=5) as held:
            held.sendall(b"GET /ping.txt HTTP/1.0\r\n")
            clients = wait_for(
                lambda: box.host.tcp_clients(port), timeout=15, what="the forwarded connection", interval=0.25
            )
        assert all("sshd: seer" in cmd for _pid, cmd in clients), clients
        # another process reuses the same forward
        again = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from seer import Sandbox; "
                "print(Sandbox.attach(sys.argv[1]).machine.expose_port(int(sys.argv[2])))",
                sandbox.sandbox_id,
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.stdout.strip() == url, again.stderr
    finally:
        m.stop_process("www")


# --- must show: a killed client; the host ends the sandbox, seer ls finds it first -------------
CLIENT = textwrap.dedent(
    """
    import json, sys, time
    from seer import Sandbox, SandboxConfig

    config = SandboxConfig.model_validate(json.loads(sys.argv[1]))
    sandbox = Sandbox(config).start(name=sys.argv[2])
    m = sandbox.machine
    m.start_process([m.python, "-c", "import time; time.sleep(600)", sys.argv[3]], name="worker")
    print(sandbox.sandbox_id, flush=True)
    time.sleep(600)
    """
)


def _seer(args: list[str], env: dict[str, str]) -> Any:
    out = subprocess.run(
        [sys.executable, "-m", "seer", *args], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout) if "--json" in args else out.stdout


def test_killed_client_the_host_ends_the_sandbox_and_seer_ls_finds_it_first(box: Box, tmp_path: Path) -> None:
    token = f"orphan{secrets.token_hex(4)}"
    config = box.config(timeout=25)
    proc = subprocess.Popen(
        [sys.executable, "-c", CLIENT, json.dumps(config.model_dump(mode="json")), "orphan", token],
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "client.err", "w"),  # noqa: SIM115 - closed with the process
        text=True,
    )
    try:
        assert proc.stdout is not None
        sandbox_id = proc.stdout.readline().strip()
        assert sandbox_id.startswith("ssh-"), (tmp_path / "client.err").read_text()[-3000:]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert _with_token(box, token), "the sandbox's process runs with its client gone"
    # a fresh SEER_HOME, knowing only the host (from the hosts file): seer ls finds the sandbox
    env = {
        **os.environ,
        "SEER_HOME": str(tmp_path / "fresh-home"),
        "SEER_SSH_HOSTS_FILE": str(box.hosts_file),
    }
    env.pop("SEER_SSH_HOSTS", None)
    listed = {m["sandbox_id"]: m for m in _seer(["ls", "--json"], env)}
    assert sandbox_id in listed, listed
    assert listed[sandbox_id]["status"] == "running" and listed[sandbox_id]["name"] == "orphan"
    # or with the host named on the command line, reached with the default key and known_hosts
    home = tmp_path / "user-home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text(box.known_hosts.read_text())
    (home / ".ssh" / "id_ed25519").write_bytes(box.host.key_path.read_bytes())
    (home / ".ssh" / "id_ed25519").chmod(0o600)
    by_env = {**env, "HOME": str(home), "SEER_SSH_HOSTS": f"seer@127.0.0.1:{box.host.port}"}
    by_env["SEER_HOME"] = str(tmp_path / "fresh-home-2")
    by_env["SEER_SSH_HOSTS_FILE"] = str(tmp_path / "no-such-file.toml")
    assert sandbox_id in {m["sandbox_id"] for m in _seer(["ls", "--json"], by_env)}
    # the watchdog on the host ends it at its timeout: no client anywhere
    wait_for(
        lambda: not _with_token(box, token),
        timeout=60,
        what="the host to end the sandbox at its timeout",
        interval=0.25,
    )
    after = {m["sandbox_id"]: m for m in _seer(["ls", "--all", "--json"], env)}
    assert after[sandbox_id]["status"] == "expired"
    meta = json.loads(box.host.exec_as_root(f"cat /home/seer/.seer/sandboxes/{sandbox_id}/meta.json").stdout)
    assert meta["status"] == "expired"
    assert box.host.exec_as_root(f"test -e /home/seer/.seer/sandboxes/{sandbox_id}/work").exit_code != 0


def test_seer_down_from_a_fresh_home_ends_a_sandbox(box: Box, tmp_path: Path) -> None:
    sb = Sandbox(box.config(timeout=600)).start(name="down-me")
    env = {**os.environ, "SEER_HOME": str(tmp_path / "fresh"), "SEER_SSH_HOSTS_FILE": str(box.hosts_file)}
    out = subprocess.run(
        [sys.executable, "-m", "seer", "down", sb.sandbox_id],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert f"{sb.sandbox_id}: terminated" in out.stdout
    assert sb.status is MachineStatus.TERMINATED


# --- must show: the second start downloads nothing and reuses the environment ------------------
def test_second_start_downloads_nothing_and_reuses_the_environment(box: Box, hub: Any) -> None:
    from _model_kit import MODEL_ID

    config = box.config(models=[{"name": MODEL_ID}], env=hub.env(), python_packages=["six"])
    # the host is shared with other modules' tests (the examples fetch this model too): its model
    # cache starts empty here, so the first start must fetch and the second must not
    box.host.exec_as_root("rm -rf /home/seer/.seer/hf-hub").check()
    first_progress = RecordingProgress()
    with Sandbox(config, progress=first_progress).start(name="model-first") as sb:
        first = sb.model_handles
        cache = sb.machine.model_cache_dir()
        cache_bytes = int(sb.exec(["du", "-sb", cache], check=True).stdout.split()[0])
        python = sb.machine.python
    served = hub.bytes_served
    assert served > 0 and first[0].bytes_downloaded > 0, "the first start fetched the model"

    second_progress = RecordingProgress()
    with Sandbox(config, progress=second_progress).start(name="model-second") as sb:
        second = sb.model_handles
        assert sb.machine.model_cache_dir() == cache
        cache_after = int(sb.exec(["du", "-sb", cache], check=True).stdout.split()[0])
        assert sb.machine.python == python, "the same environment"
        assert sb.exec_python("import six; print(six.__name__)", check=True).stdout == "six\n"
    assert hub.bytes_served == served
    assert [h.bytes_downloaded for h in second] == [0]
    assert cache_after == cache_bytes
    assert any("is there: reused" in line for line in second_progress.lines), second_progress.lines
    assert not any(line.startswith("building a Python environment") for line in second_progress.lines)


# --- hardening: what a failed or killed start leaves, and the folders' modes -------------------
@pytest.fixture
def own_base(box: Box) -> Iterator[str]:
    """A seer folder on the host of this test's own (the others' stay untouched), removed after."""
    base = f"/home/seer/.seer-{secrets.token_hex(4)}"
    try:
        yield base
    finally:
        box.host.exec_as_root(f"rm -rf {base}")


class KillingProgress(RecordingProgress):
    """SIGKILLs the host's processes of an environment build (the agent building it first, so it
    cannot clean up, then what it runs) as soon as the start reports that it builds one."""

    def __init__(self, box: Box, base: str, requirement: str):
        super().__init__()
        self.box, self.base, self.requirement = box, base, requirement
        self.killed: list[int] = []

    def update(self, text: str) -> None:
        super().update(text)
        if text.startswith("building a Python environment") and not self.killed:
            found = [(pid, cmd) for pid, cmd in self.box.host.user_processes()]
            agents = [pid for pid, cmd in found if self.requirement in cmd and " env " in cmd]
            builds = [pid for pid, cmd in found if f"{self.base}/envs/" in cmd and pid not in agents]
            self.killed = agents + builds
            self.box.host.exec_as_root(["kill", "-KILL", *map(str, self.killed)])


def _partial_envs(box: Box, base: str) -> list[str]:
    script = f"cd {base}/envs && for d in */; do [ -e $d.seer-env-complete ] || echo ${{d%/}}; done"
    return box.host.exec_as_root(script, user="seer").stdout.split()


def test_an_environment_build_killed_half_way_is_removed_by_the_next_start(box: Box) -> None:
    base = "/home/seer/.seer"
    # a package set of its own (any six satisfies it): its environment is built here, and killed
    packages = [f"six>=0.0.{secrets.randbelow(10**6)}"]
    killing = KillingProgress(box, base, packages[0])
    with pytest.raises(SandboxError):
        Sandbox(box.config(timeout=300, python_packages=packages), progress=killing).start(
            name="killed-build"
        )
    assert killing.killed, killing.lines
    assert len(_partial_envs(box, base)) == 1, "the killed build left its half-made environment"
    # the next start on the host (another package set) removes it
    with Sandbox(box.config(timeout=300)).start(name="after-killed-build") as sb:
        assert sb.exec("echo ok").stdout == "ok\n"
    assert _partial_envs(box, base) == []
    # seer's shared folders are the user's alone (the model cache names the models it holds)
    modes = box.host.exec_as_root(f"stat -c '%n %a' {base}/hf-hub {base}/runtime").stdout
    assert modes.split() == [f"{base}/hf-hub", "700", f"{base}/runtime", "700"], modes


def test_a_folder_that_cannot_be_made_fails_the_start_naming_it(box: Box, own_base: str) -> None:
    # a file where seer's runtime folder goes: mkdir -p fails there
    box.host.exec_as_root(f"mkdir -p {own_base} && touch {own_base}/runtime", user="seer").check()
    config = box.config(timeout=300, provider_options={"base_dir": own_base})
    with pytest.raises(SandboxError) as info:
        Sandbox(config).start(name="no-folder")
    assert "could not make seer's folders" in str(info.value) and f"{own_base}/runtime" in str(info.value)
    assert not [cmd for _, cmd in box.host.user_processes() if own_base in cmd], "nothing left running"

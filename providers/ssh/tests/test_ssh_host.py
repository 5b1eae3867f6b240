"""``SshHost`` is a real SSH remote: real paramiko, strict host-key checking, exec, SFTP, port
forwarding over the connection, a rotated host key, a dropped connection and a refused key."""

from __future__ import annotations

import contextlib
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest
from seer_ssh.testing import SshHost, engine_problem, new_ed25519_key

pytestmark = pytest.mark.e2e


def connect(host: SshHost, known_hosts: Path, key: Path | None = None) -> paramiko.SSHClient:
    """A paramiko client that trusts only the keys in ``known_hosts`` (unknown ones refused)."""
    client = paramiko.SSHClient()
    client.load_host_keys(str(known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        host.host,
        host.port,
        username=host.user,
        key_filename=str(key or host.key_path),
        look_for_keys=False,
        allow_agent=False,
        timeout=10,
    )
    return client


@pytest.fixture
def client(ssh_host: SshHost, tmp_path: Path) -> Iterator[paramiko.SSHClient]:
    client = connect(ssh_host, ssh_host.write_known_hosts(tmp_path / "known_hosts"))
    yield client
    client.close()


@pytest.fixture(scope="module")
def root_host() -> Iterator[SshHost]:
    """A second host: root login, a key given by the test, a session environment."""
    problem = engine_problem()
    if problem:
        pytest.skip(f"no SSH test host here: {problem}")
    private, public = new_ed25519_key()
    with SshHost(user="root", authorized_keys=[public], env={"POD_SECRET": "s3 'cr\"et", "A": "1"}) as host:
        key = host._dir / "given_key"  # the test's own key, kept with the host's files
        key.write_text(private)
        key.chmod(0o600)
        host.key_path = key
        yield host


def run(client: paramiko.SSHClient, command: str) -> tuple[int, str, str]:
    _, out, err = client.exec_command(command, timeout=30)
    code = out.channel.recv_exit_status()
    return code, out.read().decode(), err.read().decode()


def test_strict_host_key_checking_trusts_only_the_kits_line(ssh_host: SshHost, tmp_path: Path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        connect(ssh_host, empty)
    client = connect(ssh_host, ssh_host.write_known_hosts(tmp_path / "known_hosts"))
    key = client.get_transport().get_remote_server_key()
    assert f"{key.get_name()} {key.get_base64()}" == ssh_host.host_key_line
    client.close()


def test_exec_gives_stdout_stderr_and_exit_status(client: paramiko.SSHClient) -> None:
    code, out, err = run(client, "id -un; echo to-stderr >&2; exit 7")
    assert (code, out, err) == (7, "seer\n", "to-stderr\n")
    code, out, _ = run(client, "python3 -c 'import sys; print(sys.version_info[:2] >= (3, 11))'")
    assert (code, out) == (0, "True\n")


def test_the_host_has_its_own_filesystem(client: paramiko.SSHClient, tmp_path: Path) -> None:
    (tmp_path / "client-only").write_text("x")
    code, _, _ = run(client, f"test -e {tmp_path / 'client-only'}")
    assert code == 1


def test_sftp_put_and_get(client: paramiko.SSHClient, ssh_host: SshHost, tmp_path: Path) -> None:
    data = secrets.token_bytes(200_000)
    (tmp_path / "up.bin").write_bytes(data)
    sftp = client.open_sftp()
    sftp.put(str(tmp_path / "up.bin"), "/home/seer/up.bin")
    owner = ssh_host.exec_as_root("stat -c %U:%s /home/seer/up.bin").check().stdout.strip()
    assert owner == f"seer:{len(data)}"
    ssh_host.exec_as_root("cp /home/seer/up.bin /tmp/down.bin && chmod 644 /tmp/down.bin").check()
    sftp.get("/tmp/down.bin", str(tmp_path / "down.bin"))
    sftp.close()
    assert (tmp_path / "down.bin").read_bytes() == data


def test_port_forward_reaches_a_loopback_server_through_the_transport(
    client: paramiko.SSHClient, ssh_host: SshHost
) -> None:
    token = secrets.token_hex(8)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A server that exists only inside the host, bound to its loopback.
    run(client, f"mkdir -p /tmp/www && echo {token} > /tmp/www/token.txt")
    run(client, f"cd /tmp/www && (python3 -m http.server --bind 127.0.0.1 {port} >log 2>&1 </dev/null &)")
    try:
        deadline = time.monotonic() + 15
        probe_cmd = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}))'"
        while run(client, probe_cmd)[0]:
            assert time.monotonic() < deadline, "the http.server in the host did not start"
            time.sleep(0.2)
        channel = client.get_transport().open_channel("direct-tcpip", ("127.0.0.1", port), ("127.0.0.1", 0))
        channel.sendall(b"GET /token.txt HTTP/1.0\r\n")
        # The request is not finished, so the connection is open: its client end, inside the
        # host, is the user's sshd session, i.e. the bytes travel over the SSH connection.
        clients = [cmd for _, cmd in ssh_host.tcp_clients(port)]
        assert clients == ["sshd: seer@notty"], clients
        channel.sendall(b"\r\n")
        response = b""
        while chunk := channel.recv(65536):
            response += chunk
        channel.close()
        assert response.startswith(b"HTTP/1.0 200") and response.rstrip().endswith(token.encode())
    finally:
        ssh_host.exec_as_root(f"pkill -u seer -f 'http.server --bind 127.0.0.1 {port}' || true")


def test_rotated_host_key_is_refused_by_paramiko(root_host: SshHost, tmp_path: Path) -> None:
    old = root_host.write_known_hosts(tmp_path / "old_known_hosts")
    before = connect(root_host, old)
    old_line = root_host.host_key_line
    new_line = root_host.rotate_host_key()
    assert new_line != old_line
    with pytest.raises(paramiko.BadHostKeyException):
        connect(root_host, old)
    assert run(before, "echo still-here")[1] == "still-here\n"  # an open connection is unaffected
    before.close()
    after = connect(root_host, root_host.write_known_hosts(tmp_path / "new_known_hosts"))
    assert run(after, "id -un")[1] == "root\n"
    after.close()


def test_session_environment_and_given_key(root_host: SshHost, tmp_path: Path) -> None:
    client = connect(root_host, root_host.write_known_hosts(tmp_path / "known_hosts"))
    assert run(client, 'printf %s "$POD_SECRET"')[1] == "s3 'cr\"et"
    client.close()


def test_drop_connections_breaks_a_running_exec(ssh_host: SshHost, tmp_path: Path) -> None:
    client = connect(ssh_host, ssh_host.write_known_hosts(tmp_path / "known_hosts"))
    marker = secrets.token_hex(6)
    _, out, _ = client.exec_command(f"echo started; exec python3 -c 'import time; time.sleep(60)' {marker}")
    assert out.readline() == "started\n"
    try:
        assert ssh_host.drop_connections() >= 1
        started = time.monotonic()
        assert out.channel.recv_exit_status() == -1  # the channel closed with no exit status
        assert time.monotonic() - started < 10
        assert not client.get_transport().is_active()
        # What the connection ran is left behind: the provider's job to end it.
        assert any(marker in cmd for _, cmd in ssh_host.user_processes())
    finally:
        client.close()
        ssh_host.exec_as_root(f"pkill -f {marker} || true")


def test_wrong_key_and_password_are_refused(ssh_host: SshHost, tmp_path: Path) -> None:
    known_hosts = ssh_host.write_known_hosts(tmp_path / "known_hosts")
    stranger = tmp_path / "stranger"
    stranger.write_text(new_ed25519_key()[0])
    stranger.chmod(0o600)
    with pytest.raises(paramiko.AuthenticationException):
        connect(ssh_host, known_hosts, key=stranger)
    client = paramiko.SSHClient()
    client.load_host_keys(str(known_hosts))
    with contextlib.closing(client), pytest.raises(paramiko.BadAuthenticationType) as refused:
        client.connect(
            ssh_host.host, ssh_host.port, "seer", password="x", look_for_keys=False, allow_agent=False
        )
    assert refused.value.allowed_types == ["publickey"]

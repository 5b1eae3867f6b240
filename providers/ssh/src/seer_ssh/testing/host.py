"""A real SSH "remote host" for tests: OpenSSH's sshd in a container on the local Docker engine.

The container uses host networking (the test engine has no bridge), so sshd listens on a free
port of 127.0.0.1 and nowhere else. Its filesystem is its own: a path of the client that reaches
the host does so only through SSH, as on a real remote box. Keys are made fresh for every host
(ed25519, with ``cryptography``, which paramiko depends on), password login is off, and only the
host's user, with only the keys given, may log in.

The host image is the test base image (``seer-test-base:bookworm``, which ``scripts/docker-engine``
makes) plus Debian's ``openssh-server``, built once and tagged by a hash of its recipe and base,
so a second use builds nothing. It is kept between runs as a cache, like the base image;
:func:`remove_host_images` removes it. A host may ask for Python packages in its system Python
(``python_packages``), as GPU boxes and RunPod's pytorch images ship torch: they are one more
layer of the recipe, so each package set is its own image, built once per engine (a file lock
keeps test processes running side by side from building it twice).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import shutil
import socket
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seer.testing import docker_engine

if TYPE_CHECKING:
    from docker import DockerClient

#: The image the host image is built on (``scripts/docker-engine`` makes it).
DEFAULT_BASE_IMAGE = os.environ.get("SEER_DOCKER_TEST_IMAGE", "seer-test-base:bookworm")
#: Label on every host container; its value is the host's name.
HOST_LABEL = "seer.ssh-testing.host"
#: Label on the host image; its value is the recipe hash the tag is made from.
IMAGE_LABEL = "seer.ssh-testing.image"
#: Repository of the host image.
IMAGE_REPO = "seer-ssh-testing-host"
#: Where the host's own files (sshd configuration, host key, start script) live in the container.
KIT_DIR = "/seer-ssh-host"

_DOCKERFILE = """\
FROM {base}
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server \\
 && rm -rf /var/lib/apt/lists/* /etc/ssh/ssh_host_* \\
 && mkdir -p /run/sshd
"""

#: Installs packages into the system Python (``/usr/local/lib/python3.X/dist-packages`` on Debian,
#: which every ``--system-site-packages`` environment sees) with uv from a throwaway venv (Debian's
#: own Python has no pip): uv resolves and unpacks torch and its stack several times faster than pip.
#: uv ignores pip's configuration, so the layer passes it what matters from the base image's: the
#: find-links folders pip's config names (the test base image's wheel folder) and the system CA
#: bundle (the one pip trusts). Every host asking for one package set, whatever its env, shares one
#: image. Bytecode is compiled, as pip does, so hosts do not recompile torch on each import.
_PACKAGES_LAYER = """\
RUN python3 -m venv /tmp/seer-pip \\
 && /tmp/seer-pip/bin/python -m pip install -q --no-cache-dir --disable-pip-version-check \\
    --progress-bar off uv \\
 && links="$(/tmp/seer-pip/bin/python -m pip config get global.find-links 2>/dev/null || true)" \\
 && certs=/etc/ssl/certs/ca-certificates.crt \\
 && if [ -f "$certs" ]; then export SSL_CERT_FILE="$certs"; fi \\
 && /tmp/seer-pip/bin/uv pip install --quiet --no-cache --compile-bytecode --python python3 \\
    $(for link in $links; do echo --find-links "$link"; done) \\
    --target "$(python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \\
    {packages} \\
 && rm -rf /tmp/seer-pip
"""

#: Run as the container's main process (under Docker's init): make the user, give it its keys and
#: session environment, then become sshd in the foreground.
_START = f"""#!/bin/sh
set -e
user="$(cat {KIT_DIR}/user)"
if ! id -u "$user" >/dev/null 2>&1; then useradd -m -s /bin/bash "$user"; fi
# '*': no password, but not a locked account (sshd without PAM refuses locked ones).
usermod -p '*' "$user"
home="$(getent passwd "$user" | cut -d: -f6)"
mkdir -p "$home/.ssh"
cp {KIT_DIR}/authorized_keys "$home/.ssh/authorized_keys"
cp {KIT_DIR}/environment "$home/.ssh/environment"
chown -R "$user:" "$home/.ssh"
chmod 700 "$home/.ssh"
chmod 600 "$home/.ssh/authorized_keys" "$home/.ssh/environment"
exec /usr/sbin/sshd -D -e -f {KIT_DIR}/sshd_config
"""

_SSHD_CONFIG = """\
ListenAddress 127.0.0.1
Port {port}
HostKey {kit}/host_key
PidFile /run/sshd.pid
AllowUsers {user}
PermitRootLogin {root_login}
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitUserEnvironment yes
AllowTcpForwarding local
AllowAgentForwarding no
X11Forwarding no
Subsystem sftp internal-sftp
MaxSessions 64
MaxStartups 64:30:128
LogLevel VERBOSE
"""

#: Lists the session processes of one user's connections (pid and command line, one a line):
#: sshd's privileged monitor ("sshd: USER [priv]") and its unprivileged child ("sshd: USER@notty").
_SESSIONS = r"""
import os, sys
user = sys.argv[1]
_BLANKS = bytes.maketrans(b"\0\n", b"  ")
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().translate(_BLANKS).decode().strip()
    except OSError:
        continue
    if cmd.startswith((f"sshd: {user} ", f"sshd: {user}@")):
        print(pid, cmd)
"""

#: Lists the processes running as one user, sshd's own excluded (pid and command line).
_USER_PROCESSES = r"""
import os, pwd, sys
_BLANKS = bytes.maketrans(b"\0\n", b"  ")
uid = pwd.getpwnam(sys.argv[1]).pw_uid
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.stat(f"/proc/{pid}").st_uid != uid:
            continue
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().translate(_BLANKS).decode().strip()
    except OSError:
        continue
    if cmd and not cmd.startswith("sshd:") and str(os.getpid()) != pid:
        print(pid, cmd)
"""

#: Lists the processes of the host holding a TCP connection to 127.0.0.1:<port> (pid and command
#: line): who, inside the host, is a client of a server there.
_TCP_CLIENTS = r"""
import os, sys
port = int(sys.argv[1])
_BLANKS = bytes.maketrans(b"\0\n", b"  ")
inodes = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        lines = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        fields = line.split()
        remote, state, inode = fields[2], fields[3], fields[9]
        if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port:
            inodes.add(f"socket:[{inode}]")
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().translate(_BLANKS).decode().strip()
            print(pid, cmd)
    except OSError:
        continue
"""

#: What a GPU box or a pytorch image usually has in its Python, and seer's model and notebook flows
#: use: a host given these (:func:`client_pins`) builds no heavy environment for them.
ML_STACK = ("torch", "transformers", "accelerate", "jupyter_server", "ipykernel", "msgpack")

_USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SshHostError(RuntimeError):
    """The host could not be built or started; the message says why (and ends with its log)."""


@dataclass(frozen=True)
class ExecResult:
    """What a command run with :meth:`SshHost.exec_as_root` gave."""

    exit_code: int
    stdout: str
    stderr: str

    def check(self) -> ExecResult:
        """Self, or :class:`SshHostError` with the output when the command failed."""
        if self.exit_code != 0:
            raise SshHostError(f"exit status {self.exit_code}; stderr: {self.stderr.strip()[-2000:]}")
        return self


def docker_client() -> DockerClient:
    """A client of the engine ``DOCKER_HOST`` (or the local socket) names."""
    return docker_engine.docker_client("seer_ssh.testing", "seer-ssh[testing]")


def engine_problem(base_image: str = DEFAULT_BASE_IMAGE) -> str | None:
    """Why no host can be made here (no engine answers, no base image), or None."""
    return docker_engine.engine_problem(docker_client, base_image)


def new_ed25519_key() -> tuple[str, str]:
    """A fresh ed25519 key pair: (private key in OpenSSH format, public key line ``ssh-ed25519 ...``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public.decode()


def client_pins(names: Sequence[str] = ML_STACK) -> list[str]:
    """``name==version`` for each of ``names`` installed in this Python (those it lacks left out):
    a host given them has what this client has, so the image's tag is stable from run to run."""
    from importlib import metadata

    pins = []
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            pins.append(f"{name}=={metadata.version(name)}")
    return pins


def host_recipe(base: str, python_packages: Sequence[str] = ()) -> str:
    """The host image's Dockerfile on ``base``: sshd, and ``python_packages`` in the system Python."""
    dockerfile = _DOCKERFILE.format(base=base)
    if python_packages:
        dockerfile += _PACKAGES_LAYER.format(packages=" ".join(shlex.quote(p) for p in python_packages))
    return dockerfile


def host_image(
    base_image: str = DEFAULT_BASE_IMAGE,
    client: DockerClient | None = None,
    *,
    python_packages: Sequence[str] = (),
) -> str:
    """The tag of the host image on ``base_image`` (with ``python_packages`` in its system Python,
    see :func:`host_recipe`), built first if the engine lacks it.

    The tag is a hash of the Dockerfile and the base image's id: the same recipe on the same base
    finds its image and builds nothing; a rebuilt base or another package set gets a new image.
    """
    with docker_engine.client_or(client, docker_client) as engine:
        dockerfile = host_recipe(str(engine.images.get(base_image).id), python_packages)
        what = "openssh-server from Debian's packages"
        if python_packages:
            what += f"; {', '.join(python_packages)} with uv"
        return docker_engine.build_once(
            engine,
            dockerfile,
            repo=IMAGE_REPO,
            label=IMAGE_LABEL,
            failure=lambda detail: SshHostError(f"building the SSH host image ({what}) failed: {detail}"),
        )


def remove_host_images(client: DockerClient | None = None) -> list[str]:
    """Remove every host image (label ``seer.ssh-testing.image``) no container uses; their ids."""
    with docker_engine.client_or(client, docker_client) as engine:
        return docker_engine.remove_images(engine, IMAGE_LABEL)


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now (another process may take it before it is used)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SshHost:
    """One remote host: sshd on ``127.0.0.1:<port>`` in its own container, one user, fresh keys.

    ``user``: the login (made if the image lacks it; ``"root"`` logs in as root, as RunPod pods
    do). ``authorized_keys``: the public key lines that may log in; None makes a key pair for the
    test (:attr:`key_path`). ``env``: set in the container and in every SSH session of the user.
    ``volumes``: Docker named volume to mount path. ``labels``: extra container labels.
    ``port``: sshd's port (default: a free one, chosen again if it is taken before sshd binds it).
    ``python_packages``: pip requirements installed in the host's system Python when its image is
    built, as a GPU box or a pytorch image has torch (hosts asking for one set share one image).

    Use it as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    host = "127.0.0.1"

    def __init__(
        self,
        *,
        user: str = "seer",
        authorized_keys: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        volumes: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        base_image: str = DEFAULT_BASE_IMAGE,
        name: str | None = None,
        port: int | None = None,
        python_packages: Sequence[str] = (),
    ):
        if not _USER_NAME.match(user):
            raise ValueError(f"user {user!r} is not a valid login name (lowercase, [a-z0-9_-], at most 32)")
        self.env = dict(env or {})
        for key, value in self.env.items():
            if not _ENV_NAME.match(key):
                raise ValueError(f"env: {key!r} is not a valid variable name")
            if "\n" in value or "\0" in value:
                raise ValueError(f"env: the value of {key} holds a newline or NUL, which sessions cannot get")
        self.user = user
        self.name = name or f"seer-ssh-host-{secrets.token_hex(4)}"
        self.base_image = base_image
        self.python_packages = tuple(python_packages)
        self.volumes = dict(volumes or {})
        self.labels = {**(labels or {}), HOST_LABEL: self.name}
        self._dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        self.key_path: Path | None = None
        self.public_key: str | None = None
        if authorized_keys is None:
            private, self.public_key = new_ed25519_key()
            self.key_path = self._dir / "id_ed25519"
            self.key_path.write_text(private)
            self.key_path.chmod(0o600)
            authorized_keys = [self.public_key]
        self.authorized_keys = [line.strip() for line in authorized_keys if line.strip()]
        self._host_private, self.host_key_line = new_ed25519_key()
        self._fixed_port = port
        self.port = port or 0
        self.container: Any = None
        self._client: DockerClient | None = None

    # --- what a client needs --------------------------------------------------------------
    @property
    def known_hosts_line(self) -> str:
        """The host's current key as a known_hosts line (``[127.0.0.1]:<port> ssh-ed25519 ...``)."""
        return f"[{self.host}]:{self.port} {self.host_key_line}"

    def write_known_hosts(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write :attr:`known_hosts_line` to ``path`` (default: a file of this host's); the path."""
        target = Path(path) if path is not None else self._dir / "known_hosts"
        target.write_text(self.known_hosts_line + "\n")
        return target

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> SshHost:
        """Build the image if needed, start the container, and wait until sshd answers."""
        if self.container is not None:
            return self
        self._client = docker_client()
        image = host_image(self.base_image, self._client, python_packages=self.python_packages)
        last = ""
        for _ in range(1 if self._fixed_port else 3):  # a free port can be taken before sshd binds it
            self.port = self._fixed_port or free_port()
            try:
                self._run(image)
                self._wait_ready(timeout=30)
                return self
            except SshHostError as exc:
                last = str(exc)
                self._remove_container()
                if "Address already in use" not in last:
                    break
        self.stop()
        raise SshHostError(f"the SSH host {self.name} did not start: {last}")

    def _run(self, image: str) -> None:
        config = _SSHD_CONFIG.format(
            port=self.port,
            kit=KIT_DIR,
            user=self.user,
            root_login="prohibit-password" if self.user == "root" else "no",
        )
        environment = "".join(f"{key}={value}\n" for key, value in self.env.items())
        files = {
            f"{KIT_DIR}/start": (_START.encode(), 0o755),
            f"{KIT_DIR}/sshd_config": (config.encode(), 0o600),
            f"{KIT_DIR}/host_key": (self._host_private.encode(), 0o600),
            f"{KIT_DIR}/user": (self.user.encode(), 0o644),
            f"{KIT_DIR}/authorized_keys": ("\n".join(self.authorized_keys).encode() + b"\n", 0o644),
            f"{KIT_DIR}/environment": (environment.encode(), 0o600),
        }
        assert self._client is not None
        self.container = self._client.containers.create(
            image,
            command=[f"{KIT_DIR}/start"],
            name=f"{self.name}-{self.port}",
            labels=self.labels,
            environment=self.env,
            init=True,
            network_mode="host",
            # Lets root's inspections (exec_as_root) read every process's open files, sshd's too.
            cap_add=["SYS_PTRACE"],
            volumes={vol: {"bind": path, "mode": "rw"} for vol, path in self.volumes.items()},
        )
        self.container.put_archive("/", docker_engine.tar_archive(files))
        self.container.start()

    def _wait_ready(self, timeout: float) -> None:
        """Until sshd sends its banner on the port; :class:`SshHostError` with its log if it ends."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.container.reload()
            if self.container.status not in ("created", "running"):
                logs = self.container.logs().decode(errors="replace").strip()
                raise SshHostError(f"sshd exited ({self.container.status}); its log: {logs[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), 1) as sock:
                sock.settimeout(2)
                if sock.recv(64).startswith(b"SSH-2.0-"):
                    return
            time.sleep(0.1)
        raise SshHostError(f"sshd did not answer on {self.host}:{self.port} within {timeout:.0f} s")

    def stop(self) -> None:
        """Remove the container and the key files (idempotent)."""
        self._remove_container()
        if self._client is not None:
            self._client.close()
            self._client = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def _remove_container(self) -> None:
        from docker.errors import APIError, NotFound

        if self.container is not None:
            with contextlib.suppress(NotFound, APIError):
                self.container.remove(force=True)
            self.container = None

    def halt(self) -> None:
        """Stop the container, keeping it and its filesystem (a machine powered off)."""
        self.container.stop(timeout=2)

    def restart(self) -> None:
        """Start a halted container again and wait until sshd answers on the same port."""
        self.container.start()
        self._wait_ready(timeout=30)

    @property
    def running(self) -> bool:
        """Whether the container still runs."""
        if self.container is None:
            return False
        from docker.errors import NotFound

        try:
            self.container.reload()
        except NotFound:
            return False
        return bool(self.container.status == "running")

    def __enter__(self) -> SshHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what tests do to the host --------------------------------------------------------
    def exec_as_root(self, cmd: str | Sequence[str], *, user: str = "root") -> ExecResult:
        """Run ``cmd`` (a shell line, or an argv) in the container with ``docker exec``, not SSH."""
        if self.container is None:
            raise SshHostError(f"the SSH host {self.name} is not running")
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        code, (out, err) = self.container.exec_run(argv, user=user, demux=True)
        out, err = (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")
        return ExecResult(int(code), out, err)

    def _pid_lines(self, script: str, arg: str | None = None) -> list[tuple[int, str]]:
        """Run a /proc listing script in the host (argument: ``arg``, or the user); its lines."""
        listing = self.exec_as_root(["python3", "-c", script, arg or self.user]).check().stdout
        return [(int(pid), cmd) for pid, _, cmd in (line.partition(" ") for line in listing.splitlines())]

    def tcp_clients(self, port: int) -> list[tuple[int, str]]:
        """The host's processes connected to a server on ``port``: ``(pid, command line)`` each.

        A connection forwarded over SSH (a ``direct-tcpip`` channel) is held by the user's sshd
        session process; one made straight from the client machine is held by no process here.
        """
        return self._pid_lines(_TCP_CLIENTS, str(port))

    def user_processes(self) -> list[tuple[int, str]]:
        """The user's processes on the host, sshd's own excluded: ``(pid, command line)`` each."""
        return self._pid_lines(_USER_PROCESSES)

    def sessions(self) -> list[tuple[int, str]]:
        """The sshd processes serving the user's connections: ``(pid, command line)`` each."""
        return self._pid_lines(_SESSIONS)

    def drop_connections(self) -> int:
        """Kill (SIGKILL) the sshd processes of every connection of the user: each connection ends
        as if the network dropped it, and what it ran is left as it was. How many were killed."""
        # The unprivileged child holds the connection: killed first, it can send nothing more
        # (its privileged monitor, killed first, would let it close the channel cleanly).
        sessions = sorted(self.sessions(), key=lambda session: "[priv]" in session[1])
        pids = [str(pid) for pid, _ in sessions]
        if pids:
            self.exec_as_root(["kill", "-KILL", *pids])
        return len(pids)

    def rotate_host_key(self) -> str:
        """Give the host a new host key (sshd rereads it on SIGHUP); the new key line.

        Connections made from now on present the new key, so a client holding the old one in its
        known_hosts must refuse them.
        """
        self._host_private, self.host_key_line = new_ed25519_key()
        self.container.put_archive(
            "/", docker_engine.tar_archive({f"{KIT_DIR}/host_key": (self._host_private.encode(), 0o600)})
        )
        self.exec_as_root('kill -HUP "$(cat /run/sshd.pid)"').check()
        # sshd re-executes itself on SIGHUP: wait until a new connection is offered the new key.
        deadline = time.monotonic() + 15
        while self.offered_host_key() != self.host_key_line:
            if time.monotonic() > deadline:
                raise SshHostError(f"sshd on port {self.port} still offers its old host key after SIGHUP")
            time.sleep(0.1)
        return self.host_key_line

    def offered_host_key(self) -> str | None:
        """The host key line sshd offers a new connection now (None if none is made)."""
        import paramiko

        try:
            with socket.create_connection((self.host, self.port), 2) as sock:
                transport = paramiko.Transport(sock)
                try:
                    transport.start_client(timeout=5)
                    key = transport.get_remote_server_key()
                    return f"{key.get_name()} {key.get_base64()}"
                finally:
                    transport.close()
        except (OSError, paramiko.SSHException):
            return None

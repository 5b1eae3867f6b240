"""A real SLURM cluster for tests: Debian's ``slurm-wlm`` 22.05 in containers on the local engine.

* **login node**: ``munged``, ``slurmctld`` and ``sshd`` on the host's network (so it reaches
  what the client serves on 127.0.0.1, such as a model hub, as a login node reaches the internet);
  its sshd listens on a free port of 127.0.0.1 and nowhere else; ``slurmctld`` listens on a free
  port (munge authenticates every message), reached by the compute nodes at the address of their
  network's bridge.
* **compute nodes** (``c1``, ``c2``): ``munged``, ``slurmd`` and ``sshd`` (port 22 of their own
  network namespace), each in a container on an *internal* bridge network made for the cluster,
  with its default route removed: they reach the login node and each other, and nothing else.
  Each has GRES ``gpu:a100:2`` (SLURM 22.05 drops a GPU GRES without ``File=``, so two null
  devices stand in for the GPUs) and 8 CPUs by configuration (``config_overrides``).
* one user (``seer``, uid 2000) whose home is a Docker volume mounted on every node: a cluster's
  shared filesystem. It logs in with a key made for the cluster; every node's host key is written
  to :attr:`SlurmCluster.known_hosts`.
* one partition, ``gpu`` (default, ``MaxTime`` 2 hours), and ``debug`` (``MaxTime`` 10 minutes).

The image is the test base image (``seer-test-base:bookworm``) with sshd and the client's ML
packages (seer-ssh's host recipe, so the layers are shared with its hosts) plus ``slurm-wlm``,
built once per engine under a lock and kept as a cache (:func:`remove_cluster_images`).
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seer.testing import docker_engine
from seer_ssh.testing.host import (
    DEFAULT_BASE_IMAGE,
    ExecResult,
    docker_client,
    engine_problem,
    free_port,
    host_recipe,
    new_ed25519_key,
)

if TYPE_CHECKING:
    from docker import DockerClient

__all__ = [
    "CLUSTER_LABEL",
    "IMAGE_LABEL",
    "SlurmCluster",
    "SlurmClusterError",
    "cluster_image",
    "engine_problem",
    "remove_cluster_images",
]

#: Label on every container, network and volume of a cluster; its value is the cluster's name.
CLUSTER_LABEL = "seer.slurm-testing.cluster"
#: Label on the cluster image; its value is the recipe hash the tag is made from.
IMAGE_LABEL = "seer.slurm-testing.image"
IMAGE_REPO = "seer-slurm-testing-node"
USER = "seer"
UID = 2000
KIT = "/seer-slurm"

_SLURM_LAYER = """\
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
    slurm-wlm munge iproute2 procps \\
 && rm -rf /var/lib/apt/lists/* \\
 && groupadd -g {uid} {user} && useradd -u {uid} -g {uid} -M -d /home/{user} -s /bin/bash {user} \\
 && usermod -p '*' {user} \\
 && mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /run/sshd \\
 && chown slurm: /var/spool/slurmctld /var/log/slurm && chown munge: /run/munge
"""

_SLURM_CONF = """\
ClusterName=seer
SlurmctldHost={login_host}({login_addr})
SlurmctldPort={ctld_port}
SlurmdPort=6818
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=60
KillWait=2
MinJobAge=30
InactiveLimit=0
{nodes}
PartitionName=gpu Nodes={node_list} Default=YES MaxTime=02:00:00 State=UP
PartitionName=debug Nodes={node_list} MaxTime=00:10:00 State=UP
"""

_NODE = "NodeName={name} NodeAddr={addr} CPUs=8 RealMemory=4000 Gres=gpu:a100:2 State=UNKNOWN"
_GRES_CONF = "Name=gpu Type=a100 File=/dev/seer-gpu[0-1]\n"

_SSHD_CONFIG = """\
ListenAddress {listen}
Port {port}
HostKey {kit}/host_key
PidFile /run/sshd.pid
AllowUsers {user}
PermitRootLogin no
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowTcpForwarding local
AllowAgentForwarding no
X11Forwarding no
Subsystem sftp internal-sftp
MaxSessions 64
MaxStartups 64:30:128
"""

#: Started in every node (as root, by ``docker exec``): munge, then the node's SLURM daemon, then sshd.
_START = f"""#!/bin/sh
set -e
install -o munge -g munge -m 0400 {KIT}/munge.key /etc/munge/munge.key
runuser -u munge -- /usr/sbin/munged
cp {KIT}/slurm.conf {KIT}/gres.conf /etc/slurm/
if [ "$1" = login ]; then
  /usr/sbin/slurmctld
else
  ip route del default 2>/dev/null || true
  for i in 0 1; do [ -e /dev/seer-gpu$i ] || mknod -m 666 /dev/seer-gpu$i c 1 3; done
  /usr/sbin/slurmd
fi
/usr/sbin/sshd -f {KIT}/sshd_config
"""


class SlurmClusterError(RuntimeError):
    """The cluster could not be built or started; the message says why (with the logs' tail)."""


def cluster_recipe(base: str, python_packages: Sequence[str] = ()) -> str:
    """The node image's Dockerfile: seer-ssh's host recipe (sshd, the packages) plus SLURM."""
    return host_recipe(base, python_packages) + _SLURM_LAYER.format(uid=UID, user=USER)


def cluster_image(
    base_image: str = DEFAULT_BASE_IMAGE,
    client: DockerClient | None = None,
    *,
    python_packages: Sequence[str] = (),
) -> str:
    """The tag of the node image (built first if the engine lacks it; one build per engine, a
    file lock keeps test processes side by side from building it twice)."""
    with docker_engine.client_or(client, docker_client) as engine:
        dockerfile = cluster_recipe(str(engine.images.get(base_image).id), python_packages)
        return docker_engine.build_once(
            engine,
            dockerfile,
            repo=IMAGE_REPO,
            label=IMAGE_LABEL,
            failure=lambda detail: SlurmClusterError(
                f"building the SLURM node image (slurm-wlm from Debian's packages) failed: {detail}"
            ),
        )


def remove_cluster_images(client: DockerClient | None = None) -> list[str]:
    """Remove every node image no container uses; their ids."""
    with docker_engine.client_or(client, docker_client) as engine:
        return docker_engine.remove_images(engine, IMAGE_LABEL)


@dataclass
class Node:
    """One container of the cluster."""

    name: str
    container: Any
    addr: str = ""
    host_key_line: str = ""

    def exec(self, cmd: str | Sequence[str], *, user: str = "root") -> ExecResult:
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        code, (out, err) = self.container.exec_run(argv, user=user, demux=True)
        return ExecResult(
            int(code), (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")
        )


class SlurmCluster:
    """A login node and ``nodes`` compute nodes, started with :meth:`start` (or ``with``)."""

    host = "127.0.0.1"
    user = USER

    def __init__(
        self,
        *,
        nodes: int = 2,
        base_image: str = DEFAULT_BASE_IMAGE,
        python_packages: Sequence[str] = (),
        name: str | None = None,
    ):
        self.name = name or f"seer-slurm-{secrets.token_hex(4)}"
        self.node_names = [f"c{i + 1}" for i in range(nodes)]
        self.base_image = base_image
        self.python_packages = tuple(python_packages)
        self._dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        private, self.public_key = new_ed25519_key()
        self.key_path = self._dir / "id_ed25519"
        self.key_path.write_text(private)
        self.key_path.chmod(0o600)
        self.known_hosts = self._dir / "known_hosts"
        self.port = 0
        self.login: Node | None = None
        self.computes: list[Node] = []
        self._client: DockerClient | None = None
        self._network: Any = None
        self._volume: Any = None

    @staticmethod
    def problem(base_image: str = DEFAULT_BASE_IMAGE) -> str | None:
        """Why no cluster can be made here, or None."""
        return engine_problem(base_image)

    # --- what a client needs --------------------------------------------------------------
    def options(self, **changes: Any) -> dict[str, Any]:
        """``provider_options`` reaching the login node (and, through it, the compute nodes)."""
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "key_file": str(self.key_path),
            "known_hosts": str(self.known_hosts),
            "use_agent": False,
            **changes,
        }

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> SlurmCluster:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        client = self._client = docker_client()
        image = cluster_image(self.base_image, client, python_packages=self.python_packages)
        labels = {CLUSTER_LABEL: self.name}
        self._network = client.networks.create(self.name, driver="bridge", internal=True, labels=labels)
        gateway = self._network.attrs["IPAM"]["Config"][0]["Gateway"]
        self._volume = client.volumes.create(f"{self.name}-home", labels=labels)
        common = {
            "command": ["sleep", "infinity"],
            "init": True,
            "labels": labels,
            "volumes": {self._volume.name: {"bind": "/home", "mode": "rw"}},
            "cap_add": ["SYS_PTRACE"],
        }
        login = client.containers.run(
            image, detach=True, name=f"{self.name}-login", network_mode="host", **common
        )
        self.login = Node("login", login)
        for node_name in self.node_names:
            container = client.containers.run(
                image,
                detach=True,
                name=f"{self.name}-{node_name}",
                hostname=node_name,
                network=self.name,
                **{**common, "cap_add": ["SYS_PTRACE", "NET_ADMIN", "MKNOD"]},
            )
            container.reload()
            addr = container.attrs["NetworkSettings"]["Networks"][self.name]["IPAddress"]
            self.computes.append(Node(node_name, container, addr))
        login_host = self.login.exec("hostname -s").stdout.strip()
        ctld_port = free_port()
        self.port = free_port()
        conf = _SLURM_CONF.format(
            login_host=login_host,
            login_addr=gateway,
            ctld_port=ctld_port,
            nodes="\n".join(_NODE.format(name=n.name, addr=n.addr) for n in self.computes),
            node_list=",".join(self.node_names),
        )
        munge_key = secrets.token_bytes(1024)
        lines = []
        for node in [self.login, *self.computes]:
            host_private, node.host_key_line = new_ed25519_key()
            listen, port = ("127.0.0.1", self.port) if node is self.login else ("0.0.0.0", 22)
            sshd = _SSHD_CONFIG.format(listen=listen, port=port, kit=KIT, user=USER)
            node.container.put_archive(
                "/",
                docker_engine.tar_archive(
                    {
                        f"{KIT}/start": (_START.encode(), 0o755),
                        f"{KIT}/slurm.conf": (conf.encode(), 0o644),
                        f"{KIT}/gres.conf": (_GRES_CONF.encode(), 0o644),
                        f"{KIT}/munge.key": (munge_key, 0o400),
                        f"{KIT}/sshd_config": (sshd.encode(), 0o600),
                        f"{KIT}/host_key": (host_private.encode(), 0o600),
                    }
                ),
            )
            entry = f"[{self.host}]:{self.port}" if node is self.login else node.addr
            lines.append(f"{entry} {node.host_key_line}")
        self.known_hosts.write_text("\n".join(lines) + "\n")
        home = f"/home/{USER}"
        self.login.exec(
            f"mkdir -p {home}/.ssh && echo '{self.public_key}' > {home}/.ssh/authorized_keys "
            f"&& chown -R {USER}: {home} && chmod 700 {home} {home}/.ssh "
            f"&& chmod 600 {home}/.ssh/authorized_keys"
        ).check()
        for node in [self.login, *self.computes]:
            role = "login" if node is self.login else "compute"
            result = node.exec([f"{KIT}/start", role])
            if result.exit_code != 0:
                raise SlurmClusterError(f"{node.name} did not start: {result.stderr.strip()[-2000:]}")
        self._wait_ready(timeout=90)

    def _wait_ready(self, timeout: float) -> None:
        """Until sshd answers on the login node and every compute node is idle in SLURM."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            out = self.run("sinfo -h -N -o '%N %t'")
            last = out.stdout.strip() or out.stderr.strip()
            states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
            if out.exit_code == 0 and all(states.get(n, "").startswith("idle") for n in self.node_names):
                with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), 2) as s:
                    s.settimeout(2)
                    if s.recv(64).startswith(b"SSH-2.0-"):
                        return
            time.sleep(0.5)
        raise SlurmClusterError(
            f"the cluster was not ready in {timeout:.0f} s: sinfo says {last!r}\n{self.logs()}"
        )

    def logs(self) -> str:
        """The tail of every daemon's log, for error messages."""
        parts = []
        for node in [self.login, *self.computes]:
            if node is not None:
                tail = node.exec("tail -n 15 /var/log/slurm/*.log 2>&1").stdout
                parts.append(f"--- {node.name} ---\n{tail}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Remove the containers, the network, the home volume and the key files (idempotent)."""
        from docker.errors import APIError, NotFound

        for node in [*self.computes, *([self.login] if self.login else [])]:
            with contextlib.suppress(NotFound, APIError):
                node.container.remove(force=True)
        self.computes, self.login = [], None
        for thing in (self._network, self._volume):
            if thing is not None:
                with contextlib.suppress(NotFound, APIError):
                    thing.remove()
        self._network = self._volume = None
        if self._client is not None:
            self._client.close()
            self._client = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what tests do to the cluster -----------------------------------------------------
    def run(self, command: str, *, user: str = USER) -> ExecResult:
        """Run a shell line on the login node (as the cluster's user by default, in its home) by
        ``docker exec``."""
        if self.login is None:
            raise SlurmClusterError(f"the cluster {self.name} is not running")
        return self.login.exec(["bash", "-lc", f"cd && {command}"], user=user)

    def node(self, name: str) -> Node:
        return next(n for n in self.computes if n.name == name)

    def jobs(self) -> list[dict[str, str]]:
        """Every job in the queue: ``{"id", "name", "state", "reason", "node"}``."""
        out = self.run("squeue -h -a -o '%i|%j|%T|%r|%N'").check().stdout
        keys = ("id", "name", "state", "reason", "node")
        return [dict(zip(keys, line.split("|"), strict=True)) for line in out.splitlines() if line.strip()]

    def user_processes(self, node: str) -> list[tuple[int, str]]:
        """The cluster user's processes on compute node ``node``, sshd's excluded."""
        out = self.node(node).exec(f"ps -u {USER} -o pid=,args=").stdout
        found = []
        for line in out.splitlines():
            pid, _, cmd = line.strip().partition(" ")
            if pid and not cmd.startswith("sshd:") and not cmd.startswith("ps "):
                found.append((int(pid), cmd))
        return found


@contextlib.contextmanager
def running_cluster(**kwargs: Any) -> Iterator[SlurmCluster]:
    """A started :class:`SlurmCluster`, stopped after."""
    cluster = SlurmCluster(**kwargs)
    try:
        yield cluster.start()
    finally:
        cluster.stop()

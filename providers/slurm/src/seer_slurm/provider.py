"""The ``slurm`` provider: a sandbox is one SLURM job, reached over SSH through the login node.

``create``:

1. connects to the login node (seer-ssh's connection: strict host keys, key file or agent);
2. makes the sandbox's Python environment **on the login node**, where the network is, in seer's
   folder on the cluster's shared filesystem (``<base>/envs/<hash>``, one per package set, reused:
   a second start builds nothing), with seer's runtime unpacked beside it;
3. submits seer's supervisor (:mod:`seer_slurm.supervisor`) with ``sbatch``: job name
   ``seer-<sandbox id>``, comment ``seer``, ``--time`` from the config's timeout (a minute over
   it: seer's watchdog ends the sandbox at its timeout, SLURM ends the job at its ``--time`` if
   nothing else did), ``--gres=gpu:<type>:<n>`` for ``gpu``/``gpu_count``, and the partition,
   account, QOS, constraint, node count and extra arguments of ``provider_options``;
4. waits for the job, reporting SLURM's reason (``Priority``, ``Resources``, ...) as progress while
   it is queued; an interrupt or error cancels it;
5. reaches the job's node with SSH *through the login node* (a ``direct-tcpip`` channel of the
   login connection) and makes the sandbox there as seer-ssh makes one on a host of its own
   (:func:`seer_ssh.machine.provision`): its folder, its watchdog, the environment (found ready).

Commands run on the node over SSH; files travel over SFTP (the shared filesystem makes every path
the same from every node); Jupyter and served interfaces are SSH port forwards to the node's
127.0.0.1, token-guarded as everywhere. The model fetcher alone runs on the login node: compute
nodes often have no internet, so models are downloaded once into the cache on the shared
filesystem (``<base>/hf-hub``) and the node reads them from there.

``list`` asks ``squeue --me`` on every login node this client knows (its ledger's, and
``$SEER_SLURM_HOSTS``) for jobs named ``seer-slurm-...``: ``seer ls`` / ``seer down`` find them
from any machine with the same login; each shows its job's state, node, elapsed time and limit.
``terminate`` ends the sandbox on its node (its processes killed, its files removed) and
``scancel``\\ s the job.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import posixpath
import re
import secrets
import shlex
import time
from importlib import resources
from typing import Any, ClassVar

from pydantic import ValidationError
from seer.config import GPU_CATALOGUE, SandboxConfig
from seer.errors import ConfigProblem, SandboxError, SandboxNotFoundError
from seer.ids import check_sandbox_id
from seer.providers.base import (
    DETAIL_LABEL,
    Availability,
    Capabilities,
    MachineInfo,
    MachineSpec,
    MachineStatus,
    Provider,
)
from seer.providers.kit import Ledger, OutputPump
from seer.providers.wheel import runtime_requirements, runtime_wheel
from seer.state import RECORD_TTL
from seer_ssh import code_server
from seer_ssh.connection import Connection, SshConnectError, connect
from seer_ssh.forward import stop_forwards
from seer_ssh.machine import AGENT, SshMachine, agent, provision
from seer_ssh.options import SshOptions
from seer_ssh.provider import login_checks, paramiko_availability

from seer_slurm.options import SlurmOptions, cluster_hosts, gres_type

__all__ = ["SlurmMachine", "SlurmProvider", "partitions"]

#: seer's supervisor, the program each sandbox's job runs (see :mod:`seer_slurm.supervisor`).
log = logging.getLogger(__name__)

SUPERVISOR = resources.files("seer_slurm").joinpath("supervisor.py").read_text()
#: Jobs seer submits are named ``seer-<sandbox id>``.
_JOB_NAME = re.compile(r"^seer-(slurm-[0-9a-f]{12})$")
#: Run on the login node by ``list``: removes the records of sandboxes that ended more than TTL
#: seconds ago (``python3 -c SWEEP BASE TTL``), and what their jobs left in ``<base>/slurm/``.
_SWEEP = """
import json, os, shutil, sys, time
base, ttl = sys.argv[1], float(sys.argv[2])
root = os.path.join(base, "sandboxes")
for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
    try:
        with open(os.path.join(root, name, "meta.json")) as fh:
            meta = json.load(fh)
    except (OSError, ValueError):
        continue
    if meta.get("status") != "running" and time.time() - float(meta.get("ended_at") or time.time()) > ttl:
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        for suffix in (".sh", ".node", ".log"):
            try:
                os.unlink(os.path.join(base, "slurm", name + suffix))
            except OSError:
                pass
"""
#: squeue's fields for seer's jobs: id, name, state, reason, node list, elapsed, time limit.
_SQUEUE_FORMAT = "%i|%j|%T|%r|%N|%M|%l"
#: Seconds code-server's install on the login node may take (it builds native modules: minutes).
_INSTALL_TIMEOUT = 1800.0
_WAITING = ("PENDING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED")


def job_minutes(timeout: int) -> int:
    """``--time`` in minutes for a sandbox of ``timeout`` seconds: a minute over it, so seer's own
    watchdog ends the sandbox first (keeping its notebooks) and SLURM only if that failed."""
    return math.ceil(timeout / 60) + 1


def _limit_minutes(text: str) -> float | None:
    """sinfo's time limit (``2:00:00``, ``1-00:00:00``, ``30:00``, ``infinite``) in minutes."""
    text = text.strip()
    if not text or text.lower() in ("infinite", "unlimited", "n/a"):
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts[-3:]
    return (int(days or 0) * 24 + hours) * 60 + minutes + seconds / 60


def partitions(conn: Connection) -> dict[str, dict[str, Any]]:
    """The cluster's partitions by ``sinfo``: ``{name: {"default", "limit" (minutes or None),
    "gres" ({type: most per node}), "limit_text"}}``."""
    code, out, err = conn.run("sinfo -h -o '%P|%l|%G'", timeout=60)
    if code != 0:
        why = err.strip() or out.strip() or f"exit {code}"
        raise SandboxError(f"sinfo failed on {conn.options.address} (is this a SLURM login node?): {why}")
    found: dict[str, dict[str, Any]] = {}
    for line in out.splitlines():
        if line.count("|") != 2:
            continue
        name, limit, gres = line.strip().split("|")
        default = name.endswith("*")
        part = found.setdefault(
            name.rstrip("*"),
            {"default": default, "limit": _limit_minutes(limit), "limit_text": limit, "gres": {}},
        )
        for item in re.sub(r"\([^)]*\)", "", gres).split(","):
            fields = item.split(":")
            if len(fields) >= 2 and fields[0] == "gpu":
                kind = fields[1] if len(fields) == 3 else ""
                with contextlib.suppress(ValueError):
                    count = int(fields[-1])
                    part["gres"][kind] = max(part["gres"].get(kind, 0), count)
    return found


def sbatch_args(
    options: SlurmOptions, sandbox_id: str, timeout: int, gpu: str | None, gpu_count: int
) -> list[str]:
    """The ``sbatch`` options of a sandbox's job."""
    args = [
        f"--job-name=seer-{sandbox_id}",
        "--comment=seer",
        f"--time={job_minutes(timeout)}",
        f"--nodes={options.nodes}",
        "--ntasks=1",
        f"--cpus-per-task={options.cpus}",
    ]
    for flag in ("partition", "account", "qos", "constraint"):
        value = getattr(options, flag)
        if value:
            args.append(f"--{flag}={value}")
    if gpu is not None:
        args.append(f"--gres=gpu:{gres_type(gpu, options.gres_types)}:{gpu_count}")
    return [*args, *options.sbatch_args]


def cluster_problems(config: SandboxConfig, options: SlurmOptions, conn: Connection) -> list[ConfigProblem]:
    """What the cluster refuses of ``config``: an unknown partition, a GRES type or count it lacks,
    a ``--time`` over the partition's limit, and whatever ``sbatch --test-only`` refuses."""
    try:
        parts = partitions(conn)
    except SandboxError as exc:
        return [ConfigProblem("provider_options.host", str(exc))]
    names = ", ".join(sorted(parts)) or "none"
    name = options.partition or next((n for n, p in parts.items() if p["default"]), None)
    if name not in parts:
        what = f"no partition {options.partition!r}" if options.partition else "no default partition"
        return [
            ConfigProblem("provider_options.partition", f"the cluster has {what}; its partitions: {names}")
        ]
    part = parts[name]
    problems = []
    if config.gpu is not None:
        kind = gres_type(config.gpu, options.gres_types)
        offered = ", ".join(f"gpu:{k}:{n}" for k, n in sorted(part["gres"].items()) if k) or "no GPU GRES"
        if kind not in part["gres"]:
            problems.append(
                ConfigProblem(
                    "gpu",
                    f"gpu={config.gpu!r} is GRES type {kind!r}, which partition {name!r} lacks (it "
                    f"offers {offered}); pick another gpu or partition, or map seer's name to the "
                    f"cluster's type with provider_options gres_types={{{config.gpu!r}: '<type>'}}",
                )
            )
        elif config.gpu_count > part["gres"][kind]:
            problems.append(
                ConfigProblem(
                    "gpu_count",
                    f"{config.gpu_count} x gpu:{kind} asked for, but partition {name!r}'s nodes have "
                    f"at most {part['gres'][kind]}",
                )
            )
    minutes = job_minutes(config.timeout)
    if part["limit"] is not None and minutes > part["limit"]:
        problems.append(
            ConfigProblem(
                "timeout",
                f"timeout={config.timeout} s needs --time={minutes} (minutes), over partition {name!r}'s "
                f"limit of {part['limit_text']}; use a shorter timeout or another partition",
            )
        )
    if problems:
        return problems
    args = sbatch_args(options, "slurm-000000000000", config.timeout, config.gpu, config.gpu_count)
    code, out, err = conn.run(shlex.join(["sbatch", "--test-only", *args, "--wrap=true"]), timeout=60)
    if code != 0:
        why = (err.strip() or out.strip()).replace("sbatch: error: ", "")
        problems.append(
            ConfigProblem(
                "provider_options",
                f"the cluster refuses the job (sbatch --test-only {shlex.join(args)}): {why}",
            )
        )
    return problems


class SlurmMachine(SshMachine):
    """A sandbox in a SLURM job: seer-ssh's machine on the job's node, its status from SLURM."""

    provider_name = "slurm"

    def __init__(
        self, conn: Connection, sandbox_id: str, record: dict[str, Any], ledger: Ledger, login: Connection
    ):
        super().__init__(conn, sandbox_id, record, ledger)
        self.login = login
        self.job_id = str(record.get("job_id") or "")

    def job_state(self) -> str | None:
        """The job's state by ``squeue`` (``""``: SLURM no longer knows it; None: no answer)."""
        if not self.job_id:
            return None
        try:
            code, out, err = self.login.run(f"squeue -h -t all -j {int(self.job_id)} -o %T", timeout=60)
        except SandboxError:
            return None
        if code != 0:
            return "" if "Invalid job id" in err else None
        return out.strip().splitlines()[0] if out.strip() else ""

    def gone(self) -> bool:
        state = self.job_state()
        return state is not None and state != "RUNNING"

    def status(self) -> MachineStatus:
        assert self.ledger is not None
        state = self.job_state()
        if state is None or state == "RUNNING":
            return super().status()
        # the job ended: the sandbox's record on the shared filesystem says how
        meta_path = posixpath.join(self.dir, "meta.json")
        with contextlib.suppress(Exception):
            meta = json.loads(self.login.sftp(lambda sftp: sftp.open(meta_path).read()))
            if meta.get("status") and meta["status"] != MachineStatus.RUNNING.value:
                status = MachineStatus(meta["status"])
                self.ledger.end(self.id, status)
                return status
        return self.ledger.settle(self.id, self.expires_at)

    def run(self, argv: list[str], *, env: Any, cwd: str, stdin: bytes | None, pump: OutputPump) -> int:
        if _is_fetcher(argv):
            # the model fetcher downloads: on the login node, where the network is, into the
            # cache on the shared filesystem the node reads
            on_login = SshMachine(self.login, self.id, self.record, self.ledger)  # type: ignore[arg-type]
            return on_login.run(argv, env=env, cwd=cwd, stdin=stdin, pump=pump)
        return super().run(argv, env=env, cwd=cwd, stdin=stdin, pump=pump)


class SlurmProvider(Provider):
    """Sandboxes as jobs on a SLURM cluster."""

    name: ClassVar[str] = "slurm"
    id_pattern: ClassVar[str] = r"slurm-[0-9a-f]{12}"
    description: ClassVar[str] = (
        "a SLURM cluster: each sandbox a job (GRES GPUs, --time lifetime), reached through the login node"
    )
    capabilities: ClassVar[Capabilities] = Capabilities(
        gpu_types=frozenset(GPU_CATALOGUE),
        max_gpu_count=16,
        volumes=True,  # the model cache and environments on the shared filesystem outlive jobs
        port_exposure="ssh-forward",
        # a job runs as the login user on the shared filesystem, as an ssh sandbox does: hidden
        # models are refused unless the config accepts that they are not isolated
        hides_models=False,
        # code-server once per cluster, in <base>/tools on the shared filesystem: installed on the
        # login node (where the network is), or copied there from the client
        # (provider_options.code_server_from), before the job is submitted
        code_server=True,
    )
    options_model = SlurmOptions

    @classmethod
    def availability(cls) -> Availability:
        return paramiko_availability("slurm")

    @classmethod
    def check_config(cls, config: SandboxConfig) -> list[ConfigProblem]:
        problems = super().check_config(config)
        reached = login_checks(config, problems, SlurmOptions, login=SlurmOptions.login, provider="slurm")
        if reached is None:
            return problems
        options, conn = reached
        for i, pkg in enumerate(config.system_packages):
            problems.append(
                ConfigProblem(
                    f"system_packages[{i}]",
                    f"the slurm provider installs no system packages ({pkg!r}): ask the cluster's "
                    "admins for it (or a module), or remove it",
                )
            )
        if not any(p.field.startswith("gpu") or p.field == "timeout" for p in problems):
            problems += cluster_problems(config, options, conn)
        # asked of the login node: code-server is installed or copied there (the shared folder)
        problems += code_server.problems(config, options, conn)
        return problems

    def parse_options(self, config: SandboxConfig) -> SlurmOptions:
        return SlurmOptions.resolve(config.provider_options)

    # --- lifecycle ------------------------------------------------------------------------
    def create(self, spec: MachineSpec) -> SlurmMachine:
        options: SlurmOptions = spec.options
        login = connect(options.login())
        base = login.expand(options.base_dir)
        sandbox_id = f"slurm-{secrets.token_hex(6)}"
        LEDGER.begin(
            sandbox_id,
            name=spec.name,
            timeout=spec.timeout,
            labels=spec.labels,
            options=options.model_dump(),
            base=base,
        )
        try:
            return self._create(login, sandbox_id, spec, options, base)
        except BaseException:
            with contextlib.suppress(Exception):
                self._end(sandbox_id, options, base, "terminated")
            LEDGER.forget(sandbox_id)
            raise

    def _create(
        self, login: Connection, sandbox_id: str, spec: MachineSpec, options: SlurmOptions, base: str
    ) -> SlurmMachine:
        slurm_dir = posixpath.join(base, "slurm")
        spec.report(f"sandbox {sandbox_id} on the cluster of {login.options.address}, in {base}")
        python = self._prepare_env(login, base, spec)
        if spec.code_server:
            self._prepare_code_server(login, options, base, python, spec)
        agent_path = _put_once(login, slurm_dir, "agent", AGENT)
        supervisor = _put_once(login, slurm_dir, "supervisor", SUPERVISOR)
        script = posixpath.join(slurm_dir, f"{sandbox_id}.sh")
        body = "#!/bin/sh\n" + shlex.join(
            ["exec", options.python, "-u", supervisor, agent_path, base, sandbox_id]
        )
        login.sftp(lambda sftp: _write(sftp, script, body.encode(), 0o700))
        args = sbatch_args(options, sandbox_id, spec.timeout, spec.gpu, spec.gpu_count)
        args.append(f"--output={posixpath.join(slurm_dir, sandbox_id)}.log")
        code, out, err = login.run(shlex.join(["sbatch", "--parsable", *args, script]), timeout=120)
        if code != 0:
            raise SandboxError(f"sbatch refused the sandbox's job: {(err.strip() or out.strip())}")
        job_id = out.strip().split(";")[0]
        if not job_id.isdigit():
            raise SandboxError(f"sbatch answered {out.strip()!r}, not a job id")
        LEDGER.update(sandbox_id, job_id=job_id)
        spec.report(f"submitted job {job_id} ({shlex.join(args)})")
        node = self._wait_running(login, job_id, sandbox_id, slurm_dir, options, spec)
        addr = _node_addr(login, node)
        node_options = options.node(addr, options.known_hosts)
        LEDGER.update(sandbox_id, node=node, node_options=node_options.model_dump())
        spec.report(f"job {job_id} runs on {node}: making the sandbox there")
        conn = connect(node_options)
        machine = provision(conn, _NodeMachine, sandbox_id, spec, base=base, ledger=LEDGER)
        record = {
            **machine.record,
            "job_id": job_id,
            "node": node,
            "node_options": node_options.model_dump(),
        }
        LEDGER.update(sandbox_id, **{k: v for k, v in record.items() if k != "status"})
        return SlurmMachine(conn, sandbox_id, record, LEDGER, login)

    def _prepare_env(self, login: Connection, base: str, spec: MachineSpec) -> str:
        """The sandbox's Python environment and seer's runtime, made on the login node (where
        the network is) in the shared folder, or found there; the environment's Python."""
        wheel = runtime_wheel()
        remote_wheel = posixpath.join(base, "runtime", f"{wheel.sha256[:16]}.whl")
        login.run(f"mkdir -p {shlex.quote(posixpath.dirname(remote_wheel))} {shlex.quote(base + '/hf-hub')}")
        try:
            login.sftp(lambda sftp: sftp.stat(remote_wheel))
        except FileNotFoundError:
            login.sftp(lambda sftp: sftp.put(str(wheel.path), remote_wheel + ".part"))
            login.sftp(lambda sftp: sftp.posix_rename(remote_wheel + ".part", remote_wheel))
        requirements = [*spec.python_packages, *runtime_requirements()]
        spec.report("the Python environment: on the login node, in the shared folder")
        made = agent(login, "env", base, json.dumps(requirements), remote_wheel, timeout=3600)
        spec.report(
            "built the Python environment" if made.get("built") else "the Python environment is there"
        )
        return str(made["python"])

    def _prepare_code_server(
        self, login: Connection, options: SlurmOptions, base: str, python: str, spec: MachineSpec
    ) -> None:
        """code-server for ``debug=True`` in the shared tools folder, before the job is submitted
        (its nodes may have no network): copied from the client where ``code_server_from``
        names an install prepared there, else installed on the login node with the sandbox's
        Python (:mod:`seer.providers.code_server`). Nothing is done where it is there."""
        if options.code_server_from:
            code_server.copy_prepared(login, options, base, spec.report)
            return
        tools = code_server.tools_dir(base)
        source = resources.files("seer.providers").joinpath("code_server.py").read_bytes()
        spec.report(f"code-server: installed in {tools} on the login node unless it is there")
        code, out, err = login.run(shlex.join([python, "-", tools]), stdin=source, timeout=_INSTALL_TIMEOUT)
        if code != 0:
            raise SandboxError(
                f"could not install code-server on the login node {login.options.address}:\n"
                f"{(out + err).strip()[-4000:]}"
            )
        report = json.loads(out.strip().splitlines()[-1])
        spec.report(
            f"code-server: installed in {report['root']}"
            if report["installed"]
            else f"code-server: {tools} has it: nothing installed"
        )

    def _wait_running(
        self,
        login: Connection,
        job_id: str,
        sandbox_id: str,
        slurm_dir: str,
        options: SlurmOptions,
        spec: MachineSpec,
    ) -> str:
        """The node the job runs on, once its supervisor started; SLURM's reason reported while
        it waits."""
        started = time.monotonic()
        last = ""
        node_file = posixpath.join(slurm_dir, f"{sandbox_id}.node")
        delay = 0.1
        while True:
            code, out, err = login.run(f"squeue -h -t all -j {job_id} -o '%T|%r|%N'", timeout=60)
            fields = [*out.strip().split("|"), "", "", ""] if out.strip() else ["", "", ""]
            state, reason = fields[0], fields[1]
            if state == "RUNNING":
                with contextlib.suppress(FileNotFoundError, ValueError):
                    info = json.loads(login.sftp(lambda sftp: sftp.open(node_file).read()))
                    return str(info.get("node") or info["host"])
            elif state in _WAITING or (not state and code == 0 and time.monotonic() - started < 5):
                text = f"job {job_id} waiting in the queue: {reason or state or 'submitted'}"
                if text != last:
                    spec.report(text)
                    last = text
            else:
                tail = _log_tail(login, posixpath.join(slurm_dir, f"{sandbox_id}.log"))
                raise SandboxError(
                    f"job {job_id} ended before the sandbox started ({state or err.strip() or 'gone'}"
                    f"{', ' + reason if reason and reason != 'None' else ''}){tail}"
                )
            if options.queue_timeout is not None and time.monotonic() - started > options.queue_timeout:
                raise SandboxError(
                    f"job {job_id} waited over provider_options queue_timeout={options.queue_timeout:g} s "
                    f"({last or state}); it was cancelled"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 2.0)

    # --- finding jobs ---------------------------------------------------------------------
    def _logins(self) -> dict[str, SlurmOptions]:
        """Every login node this client knows: its ledger's and ``$SEER_SLURM_HOSTS``'s."""
        found: dict[str, SlurmOptions] = {}
        for path in LEDGER.dir.glob("*.json"):
            record = LEDGER.read(path.stem) or {}
            with contextlib.suppress(ValidationError, TypeError):
                if record.get("options"):
                    options = SlurmOptions.model_validate(record["options"])
                    found[options.login().model_dump_json()] = options
        for options in cluster_hosts():
            found.setdefault(options.login().model_dump_json(), options)
        return found

    @staticmethod
    def _jobs(login: Connection) -> dict[str, dict[str, str]]:
        """seer's jobs in the queue on this login, by sandbox id."""
        code, out, err = login.run(f"squeue --me -h -o '{_SQUEUE_FORMAT}'", timeout=60)
        if code != 0:
            raise SandboxError(f"squeue failed on {login.options.address}: {err.strip() or out.strip()}")
        jobs = {}
        for line in out.splitlines():
            fields = line.strip().split("|")
            if len(fields) != 7:
                continue
            match = _JOB_NAME.match(fields[1])
            if match and LEDGER.valid(match.group(1)):
                keys = ("job_id", "name", "state", "reason", "nodes", "elapsed", "limit")
                jobs[match.group(1)] = dict(zip(keys, fields, strict=True))
        return jobs

    def _locate(self, machine_id: str) -> tuple[SlurmOptions, Connection, dict[str, Any]] | None:
        """The login node of ``machine_id``, a connection to it and the sandbox's record (the
        job's id and node added from ``squeue``); None if no known cluster has it."""
        record = LEDGER.read(machine_id)
        candidates = self._logins()
        if record is not None and record.get("options"):
            options = SlurmOptions.model_validate(record["options"])
            candidates = {"": options, **candidates}
        for options in candidates.values():
            try:
                login = connect(options.login())
                jobs = self._jobs(login)
            except (SandboxError, OSError):
                continue
            base = login.expand(options.base_dir)
            found = dict(record or {})
            job = jobs.get(machine_id)
            if job is None and not found.get("job_id"):
                continue
            if job is not None:
                found.update(job_id=job["job_id"], node=job["nodes"].split(",")[0], job=job)
            meta = _read_meta(login, base, machine_id)
            found = {**meta, **found, "base": base, "options": options.model_dump()}
            return options, login, found
        return None

    def attach(self, machine_id: str) -> SlurmMachine:
        check_sandbox_id(machine_id, type(self))
        located = self._locate(machine_id)
        if located is None:
            raise SandboxNotFoundError(f"no slurm sandbox {machine_id!r} on any cluster this client knows")
        options, login, record = located
        node_options = record.get("node_options")
        if not node_options:
            if not record.get("node") or not record.get("job"):
                raise SandboxNotFoundError(f"slurm sandbox {machine_id!r} has no running job")
            node_options = options.node(_node_addr(login, record["node"]), options.known_hosts).model_dump()
            record["node_options"] = node_options
        LEDGER.update(machine_id, **{k: v for k, v in record.items() if k not in ("status", "job")})
        conn = _connect_lazily(SshOptions.model_validate(node_options))
        return SlurmMachine(conn, machine_id, record, LEDGER, login)

    def list(self) -> list[MachineInfo]:
        live: list[MachineInfo] = []
        unreachable: set[str] = set()
        for key, options in self._logins().items():
            try:
                login = connect(options.login())
                jobs = self._jobs(login)
                base = login.expand(options.base_dir)
            except (SandboxError, OSError):
                unreachable.add(key)
                continue
            with contextlib.suppress(SandboxError):  # housekeeping: a failure here hides nothing
                login.run(login.python_line(_SWEEP, base, str(RECORD_TTL)), timeout=60)
            for sandbox_id, job in jobs.items():
                meta = _read_meta(login, base, sandbox_id)
                if meta.get("status") not in (None, MachineStatus.RUNNING.value):
                    continue  # the sandbox ended; its job is finishing
                record = LEDGER.read(sandbox_id) or {}
                running = job["state"] == "RUNNING"
                live.append(
                    MachineInfo(
                        sandbox_id,
                        self.name,
                        str(meta.get("name") or record.get("name") or sandbox_id),
                        MachineStatus.RUNNING if running else MachineStatus.STARTING,
                        float(meta.get("created_at") or record.get("created_at") or time.time()),
                        meta.get("expires_at") or record.get("expires_at"),
                        {
                            **(meta.get("labels") or record.get("labels") or {}),
                            "slurm.job_id": job["job_id"],
                            "slurm.state": job["state"] if running else f"{job['state']} ({job['reason']})",
                            "slurm.node": job["nodes"] or "-",
                            "slurm.elapsed": job["elapsed"],
                            "slurm.limit": job["limit"],
                            "slurm.login": options.login().address,
                            DETAIL_LABEL: _detail(job),
                        },
                    )
                )
        alive_ids = {
            path.stem
            for path in LEDGER.dir.glob("*.json")
            if _login_key((LEDGER.read(path.stem) or {}).get("options")) in unreachable
        }
        return LEDGER.machines(live, alive=lambda sandbox_id: sandbox_id in alive_ids)

    def terminate(self, machine_id: str) -> None:
        check_sandbox_id(machine_id, type(self))
        LEDGER.end(machine_id, MachineStatus.TERMINATED)
        stop_forwards(self.name, machine_id)
        located = self._locate(machine_id)
        if located is not None:
            options, _login, record = located
            self._end(machine_id, options, record["base"], "terminated", record)

    def _end(
        self,
        sandbox_id: str,
        options: SlurmOptions,
        base: str,
        status: str,
        record: dict[str, Any] | None = None,
    ) -> None:
        """End the sandbox on its node (processes killed, files removed) and cancel its job."""
        record = record if record is not None else (LEDGER.read(sandbox_id) or {})
        login = connect(options.login())
        node_options = record.get("node_options")
        if node_options:
            with contextlib.suppress(SandboxError, OSError):
                node = connect(SshOptions.model_validate(node_options))
                agent(node, "end", base, sandbox_id, status, timeout=60)
        job_ids = {str(record["job_id"])} if record.get("job_id") else set()
        with contextlib.suppress(SandboxError):
            job = self._jobs(login).get(sandbox_id)
            if job is not None:
                job_ids.add(job["job_id"])
        if job_ids:
            code, out, err = login.run(shlex.join(["scancel", *sorted(job_ids)]), timeout=60)
            if code != 0 and "Invalid job id" not in err:
                raise SandboxError(
                    f"scancel {' '.join(sorted(job_ids))} failed: {err.strip() or out.strip()}"
                )
            _wait_jobs_gone(login, job_ids)


#: How long ``terminate`` waits for a cancelled job to leave the queue (its processes ended on
#: the node): SLURM sends SIGTERM, and SIGKILL after the cluster's KillWait (30 s by default).
JOB_END_WAIT = 45.0


def _wait_jobs_gone(login: Connection, job_ids: set[str]) -> None:
    """Wait until ``squeue`` no longer lists ``job_ids`` (at most :data:`JOB_END_WAIT`).

    ``scancel`` returns as soon as the signal is sent; the job's supervisor then ends the sandbox
    on the node (it is COMPLETING meanwhile). Waiting here means that when ``terminate`` returns,
    nothing of the sandbox runs on the node any more. A job still there after the wait is left
    to SLURM (it kills the job's processes after its KillWait) and logged."""
    deadline = time.monotonic() + JOB_END_WAIT
    delay = 0.05
    while True:
        with contextlib.suppress(SandboxError):  # squeue failed: asked again
            if not job_ids & {job["job_id"] for job in SlurmProvider._jobs(login).values()}:
                return
        if time.monotonic() >= deadline:
            log.warning(
                "job %s still in the queue %g s after scancel; SLURM ends it",
                " ".join(sorted(job_ids)),
                JOB_END_WAIT,
            )
            return
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def _is_fetcher(argv: list[str]) -> bool:
    """Whether ``argv`` runs seer's model fetcher (``python -m seer.runtime.fetch``, as core's
    model step runs it, through ``env --``)."""
    head = argv[:5]
    return any(head[i : i + 2] == ["-m", "seer.runtime.fetch"] for i in range(len(head) - 1))


class _NodeMachine(SshMachine):
    """What :func:`provision` makes the sandbox with on the node (a :class:`SlurmMachine` is
    made from its record after)."""

    provider_name = "slurm"
    # the agent's begin runs on the login node, whose Python may not be the node's: the node's
    # own ``env`` call finds (or builds) the environment
    begin_finds_env = False


def _detail(job: dict[str, str]) -> str:
    """``seer ls``'s line about a job: ``job 12 RUNNING on c1, 1:05 of 11:00`` (the reason
    while it waits: ``job 13 PENDING (Resources), 0:00 of 11:00``)."""
    state = job["state"] if job["state"] == "RUNNING" else f"{job['state']} ({job['reason']})"
    where = f" on {job['nodes']}" if job["nodes"] and job["state"] == "RUNNING" else ""
    return f"job {job['job_id']} {state}{where}, {job['elapsed']} of {job['limit']}"


def _connect_lazily(options: Any) -> Connection:
    try:
        return connect(options)
    except SshConnectError:
        return Connection(options)


def _node_addr(login: Connection, node: str) -> str:
    """The address SLURM reaches ``node`` at (its ``NodeAddr``), else its name."""
    code, out, _ = login.run(shlex.join(["scontrol", "show", "node", "-o", node]), timeout=60)
    match = re.search(r"\bNodeAddr=(\S+)", out) if code == 0 else None
    return match.group(1) if match else node


def _read_meta(login: Connection, base: str, sandbox_id: str) -> dict[str, Any]:
    path = posixpath.join(base, "sandboxes", sandbox_id, "meta.json")
    try:
        data = json.loads(login.sftp(lambda sftp: sftp.open(path).read()))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _log_tail(login: Connection, path: str) -> str:
    with contextlib.suppress(OSError, ValueError):
        text = login.sftp(lambda sftp: sftp.open(path).read()).decode(errors="replace").strip()
        if text:
            return "\n--- the job's output ---\n" + "\n".join(text.splitlines()[-20:])
    return ""


def _write(sftp: Any, path: str, data: bytes, mode: int) -> None:
    with sftp.open(path + ".tmp", "wb") as fh:
        fh.write(data)
    sftp.chmod(path + ".tmp", mode)
    sftp.posix_rename(path + ".tmp", path)


def _put_once(login: Connection, folder: str, stem: str, source: str) -> str:
    """``source`` as ``<folder>/<stem>-<hash>.py`` on the shared filesystem (written once)."""
    import hashlib

    path = posixpath.join(folder, f"{stem}-{hashlib.sha256(source.encode()).hexdigest()[:16]}.py")
    try:
        login.sftp(lambda sftp: sftp.stat(path))
    except FileNotFoundError:
        login.run(f"mkdir -p -m 700 {shlex.quote(folder)}")
        login.sftp(lambda sftp: _write(sftp, path, source.encode(), 0o600))
    return path


def _login_key(options: Any) -> str:
    with contextlib.suppress(ValidationError, TypeError):
        return SlurmOptions.model_validate(options).login().model_dump_json() if options else ""
    return ""


#: The ledger of this client's slurm sandboxes: ``$SEER_HOME/slurm/sandboxes/<id>.json``.
LEDGER = Ledger(SlurmProvider)

"""A throwaway third-party seer provider, ``toy``: proof that the contract plus the kit is enough.

Written apart from seer's ``local`` provider against the public contract (:mod:`seer.providers.base`)
and the provider kit (:mod:`seer.providers.kit`). It only knows how to *run a command* (a local
subprocess, as an SDK would run one remotely); the kit gives it exec with deadlines, background
processes, files and directories (tar streams over exec), the starter watch and status tracking.
A toy sandbox is a folder, ``$SEER_HOME/toy/boxes/<id>/`` (``state.json``: its environment and
secrets, 0600; ``root/``: the working directory), plus processes that all carry
``SEER_TOY_SANDBOX=<id>``. Ending it removes the folder and kills those processes: ``terminate``
does, and so does a watchdog started in the sandbox when its timeout passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import seer
from seer.errors import ConfigProblem, SandboxNotFoundError
from seer.ids import check_sandbox_id
from seer.providers import kit
from seer.providers.base import Capabilities, MachineInfo, MachineSpec, MachineStatus, Provider
from seer.state import private_dir, read_json, seer_home, write_json

MARK = "SEER_TOY_SANDBOX"


def _box(sandbox_id: str) -> Path:
    return seer_home() / "toy" / "boxes" / sandbox_id


def _end(sandbox_id: str) -> list[str]:
    """The argv that ends a toy sandbox: its folder goes, then every process carrying its mark."""
    return [
        "bash",
        "-c",
        'rm -rf -- "$0"; exec "$@"',
        str(_box(sandbox_id)),
        *kit.kill_marked_argv(MARK, sandbox_id),
    ]


class ToyMachine(kit.ExecMachine):
    """A toy sandbox: commands run as local processes in its folder."""

    def __init__(self, sandbox_id: str):
        self.id = sandbox_id
        self.workdir = str(_box(sandbox_id) / "root")
        self.python = sys.executable
        self.ledger = LEDGER

    def run(
        self, argv: list[str], *, env: Mapping[str, str], cwd: str, stdin: bytes | None, pump: kit.OutputPump
    ) -> int:
        try:
            state = read_json(_box(self.id) / "state.json")
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env={**state["env"], **state["secrets"], **env},
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            if not os.path.isdir(self.workdir):
                raise self.not_running() from None
            raise
        return kit.pump_popen(proc, pump, stdin)

    def expose_port(self, port: int) -> str:
        if not os.path.isdir(self.workdir):
            raise self.not_running()
        return f"http://127.0.0.1:{int(port)}"

    def status(self) -> MachineStatus:
        return LEDGER.status(self.id, alive=os.path.isdir(self.workdir))


class ToyProvider(Provider):
    """Sandboxes as folders plus processes, written against the contract and the kit only."""

    name: ClassVar[str] = "toy"
    id_pattern: ClassVar[str] = r"toy-[0-9a-f]{12}"
    description: ClassVar[str] = "a throwaway test provider: folders plus processes, on the provider kit"
    capabilities: ClassVar[Capabilities] = Capabilities(port_exposure="loopback", max_lifetime=6 * 3600)

    @classmethod
    def check_config(cls, config: seer.SandboxConfig) -> list[ConfigProblem]:
        problems = super().check_config(config)
        for field in ("python_packages", "system_packages"):
            if getattr(config, field):
                problems.append(ConfigProblem(field, "the toy provider installs no packages"))
        return problems

    def create(self, spec: MachineSpec) -> ToyMachine:
        sandbox_id = f"toy-{uuid.uuid4().hex[:12]}"
        LEDGER.begin(sandbox_id, name=spec.name, timeout=spec.timeout, labels=spec.labels)
        try:
            private_dir(_box(sandbox_id) / "root", exist_ok=False)
            env = {k: os.environ[k] for k in ("HOME", "LANG", "TMPDIR", "SEER_HOME") if k in os.environ}
            path = f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '/usr/bin:/bin')}"
            env.update(PATH=path, **spec.env, **{MARK: sandbox_id})
            write_json(_box(sandbox_id) / "state.json", {"env": env, "secrets": spec.secrets})
            machine = ToyMachine(sandbox_id)
            machine.start_watchdog(spec.timeout, _end(sandbox_id))
            return machine
        except BaseException:
            subprocess.run(_end(sandbox_id), check=False)
            LEDGER.forget(sandbox_id)
            raise

    def attach(self, machine_id: str) -> ToyMachine:
        check_sandbox_id(machine_id, ToyProvider)
        if LEDGER.read(machine_id) is None:
            raise SandboxNotFoundError(f"no toy sandbox {machine_id!r}")
        return ToyMachine(machine_id)

    def list(self) -> list[MachineInfo]:
        return LEDGER.machines(alive=lambda sandbox_id: _box(sandbox_id).is_dir())

    def terminate(self, machine_id: str) -> None:
        check_sandbox_id(machine_id, ToyProvider)  # a malformed id is an error, an unknown one not
        LEDGER.end(machine_id, MachineStatus.TERMINATED)
        subprocess.run(_end(machine_id), check=False)


LEDGER = kit.Ledger(ToyProvider)


@seer.hookimpl
def seer_register_providers(register: Any) -> None:
    register(ToyProvider)

"""``SandboxConfig.provider_options`` for the SLURM provider.

How to reach the cluster's login node is seer-ssh's (``host``, ``port``, ``user``, ``key_file``,
``known_hosts``, ... or a name from the SSH hosts file); the rest says how the job is submitted.
Every field is checked against the cluster (``sinfo``, ``sbatch --test-only``) before a job is
submitted: see :meth:`seer_slurm.provider.SlurmProvider.check_config`.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import Field, field_validator
from seer_ssh.options import SshOptions, named_hosts

__all__ = ["SlurmOptions", "cluster_hosts", "gres_type"]

_NAME = re.compile(r"^[A-Za-z0-9_.,:&|!()\[\]*+-]+$")
#: What ``sbatch_args`` may not set: seer sets them itself.
_OWN_FLAGS = ("--job-name", "-J", "--time", "-t", "--output", "-o", "--error", "-e", "--comment", "--wrap")


def gres_type(gpu: str, mapping: dict[str, str]) -> str:
    """The cluster's GRES type for seer's GPU name: ``mapping``'s, else the name lowercased with
    ``-`` as ``_`` (``A100`` -> ``a100``, ``A100-80GB`` -> ``a100_80gb``)."""
    return mapping.get(gpu) or gpu.lower().replace("-", "_")


class SlurmOptions(SshOptions):
    """The login node (seer-ssh's fields) and how each sandbox's job is submitted."""

    base_dir: str = Field(
        "~/.seer-slurm",
        description="seer's folder on the cluster's shared filesystem, seen at the same path from "
        "the login node and every compute node ('~' is the remote home)",
    )
    partition: str | None = Field(None, description="the partition (default: the cluster's default one)")
    account: str | None = Field(None, description="the account the job is charged to (sbatch --account)")
    qos: str | None = Field(None, description="the quality of service (sbatch --qos)")
    constraint: str | None = Field(None, description="node features the job needs (sbatch --constraint)")
    nodes: int = Field(1, ge=1, le=64, description="nodes allocated; the sandbox runs on the first")
    cpus: int = Field(1, ge=1, le=1024, description="CPUs for the sandbox (sbatch --cpus-per-task)")
    sbatch_args: list[str] = Field(
        default_factory=list,
        description="more sbatch arguments, e.g. ['--mem=32G'] (checked with --test-only)",
    )
    gres_types: dict[str, str] = Field(
        default_factory=dict,
        description="seer's GPU name -> the cluster's GRES type, where the default (the name "
        "lowercased, '-' as '_': A100 -> a100) is not the cluster's",
    )
    node_host_key_policy: str = Field(
        "accept-new",
        description="host keys of compute nodes (reached through the login node): 'strict' (in "
        "known_hosts) or 'accept-new' (recorded on first use, a changed key still refused)",
    )
    queue_timeout: float | None = Field(
        None,
        gt=0,
        description="seconds a job may wait in the queue before the start gives up (None: no limit)",
    )

    @field_validator("partition", "account", "qos", "constraint")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is not None and (not _NAME.match(value) or value.startswith("-")):
            raise ValueError(f"{value!r} is not a SLURM name")
        return value

    @field_validator("sbatch_args")
    @classmethod
    def _check_args(cls, value: list[str]) -> list[str]:
        for arg in value:
            if not arg.startswith("-"):
                raise ValueError(f"sbatch_args: {arg!r} is not an option (write '--mem=32G', one item each)")
            flag = arg.split("=", 1)[0]
            if flag in _OWN_FLAGS:
                raise ValueError(f"sbatch_args: {flag} is seer's to set (the config's timeout sets --time)")
        return value

    @field_validator("gres_types")
    @classmethod
    def _check_gres(cls, value: dict[str, str]) -> dict[str, str]:
        for gpu, kind in value.items():
            if not re.match(r"^[A-Za-z0-9_.-]+$", kind):
                raise ValueError(f"gres_types[{gpu!r}]: {kind!r} is not a GRES type")
        return value

    @field_validator("node_host_key_policy")
    @classmethod
    def _check_policy(cls, value: str) -> str:
        if value not in ("strict", "accept-new"):
            raise ValueError("node_host_key_policy must be 'strict' or 'accept-new'")
        return value

    def login(self) -> SshOptions:
        """The login node's SSH options alone."""
        return SshOptions.model_validate({k: getattr(self, k) for k in SshOptions.model_fields})

    def node(self, addr: str, known_hosts: str) -> SshOptions:
        """How to reach compute node ``addr``: through the login node, as the same user and key."""
        return self.login().model_copy(
            update={
                "host": addr,
                "port": 22,
                "known_hosts": known_hosts,
                "host_key_policy": self.node_host_key_policy,
                "jump": self.login(),
            }
        )


def cluster_hosts() -> list[SlurmOptions]:
    """The login nodes named in ``$SEER_SLURM_HOSTS`` (comma-separated ``user@host:port``, or
    names from the SSH hosts file): where ``seer ls`` / ``seer down`` look from a fresh
    ``$SEER_HOME``, besides the clusters this client submitted to."""
    out = []
    hosts = named_hosts()
    for spec in filter(None, (s.strip() for s in os.environ.get("SEER_SLURM_HOSTS", "").split(","))):
        data: dict[str, Any]
        if spec in hosts:
            data = dict(hosts[spec])
        else:
            user, _, rest = spec.rpartition("@")
            host, _, port = rest.partition(":")
            data = {"host": host, **({"user": user} if user else {}), **({"port": port} if port else {})}
        try:
            out.append(SlurmOptions.model_validate(data))
        except ValueError as exc:
            raise ValueError(f"SEER_SLURM_HOSTS: {spec!r}: {exc}") from None
    return out

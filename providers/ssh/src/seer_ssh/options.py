"""``SandboxConfig.provider_options`` for the SSH provider, and the hosts a user names.

A host is named in a config's ``provider_options`` (every field below), or by its name in the
user's hosts file, ``~/.config/seer/ssh-hosts.toml`` (``$SEER_SSH_HOSTS_FILE`` to move it)::

    [hosts.gpu-box]
    host = "gpu-box.example.org"
    user = "me"
    key_file = "~/.ssh/id_ed25519"

so ``provider_options={"host": "gpu-box"}`` is enough, and ``seer ls`` / ``seer down`` look at every
host there (besides the hosts this client started sandboxes on) to find sandboxes after a client
crash. On the command line, ``SEER_SSH_HOSTS="me@box,me@other:2222" seer ls`` adds hosts reached
with the default keys, agent and known_hosts.
"""

from __future__ import annotations

import getpass
import os
import posixpath
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["SshOptions", "check_interpreter", "command_line_hosts", "hosts_file", "named_hosts"]

_HOST = re.compile(r"^[A-Za-z0-9_.:\[\]-]+$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def check_interpreter(value: str) -> str:
    """``value``, where it can name the remote Python (a name or a path: not empty, no white
    space, not an option); a ValueError naming it otherwise. seer-runpod's options use it too."""
    if not value or any(c.isspace() for c in value) or value.startswith("-"):
        raise ValueError(f"{value!r} is not an interpreter name or path")
    return value


class SshOptions(BaseModel):
    """How to reach the remote host and where seer lives on it. Only ``host`` is required."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(description="the host's name or address, or a name from the hosts file")
    port: int = Field(22, ge=1, le=65535, description="sshd's port")
    user: str = Field(default_factory=getpass.getuser, description="the login (default: your own)")
    key_file: str | None = Field(
        None, description="private key file; None: the SSH agent and ~/.ssh/id_* keys"
    )
    use_agent: bool = Field(True, description="try the keys of a running SSH agent")
    known_hosts: str = Field(
        "~/.ssh/known_hosts", description="the known_hosts file host keys are checked against"
    )
    host_key_policy: Literal["strict", "accept-new"] = Field(
        "strict",
        description="'strict': an unknown or changed host key is refused; 'accept-new': an unknown "
        "one is added to known_hosts (a changed one is still refused)",
    )
    base_dir: str = Field("~/.seer", description="seer's folder on the remote host ('~' is the remote home)")
    python: str = Field("python3", description="the remote Python (>= 3.11) environments are made from")
    connect_timeout: float = Field(20.0, gt=0, description="seconds to wait for the connection")
    allow_unisolated_hidden_models: bool = Field(
        False,
        description="run a config with hidden models although every sandbox runs as the login user, "
        "so the agent can read the host's shared model cache, other sandboxes and the user's files "
        "there and may identify the model (refused by default)",
    )
    code_server_from: str | None = Field(
        None,
        # how to make a sandbox, not how to reach the host: left out of the options' identity
        # (records, the connection pool, the hosts ``seer ls`` asks)
        exclude=True,
        description="a tools folder on this machine holding a complete code-server install of the "
        "version seer uses (as scripts/code-server makes it, e.g. '~/.cache/seer/tools'), built for "
        "the host's platform: debug=True copies it into the host's tools folder once, instead of "
        "installing code-server there (no compilers or registries needed on the host)",
    )
    jump: SshOptions | None = Field(
        None,
        description="a host to connect through (OpenSSH's ProxyJump): the connection to this host "
        "travels as a forwarded channel of the connection to ``jump`` (how seer-slurm reaches "
        "compute nodes through a cluster's login node)",
    )

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        if not _HOST.match(value) or value.startswith("-"):
            raise ValueError(f"{value!r} is not a host name or address")
        return value

    @field_validator("user")
    @classmethod
    def _check_user(cls, value: str) -> str:
        if not _USER.match(value):
            raise ValueError(f"{value!r} is not a login name")
        return value

    @field_validator("base_dir")
    @classmethod
    def _check_base(cls, value: str) -> str:
        if not (value == "~" or value.startswith("~/") or posixpath.isabs(value)):
            raise ValueError(f"base_dir must be absolute or start with '~/', got {value!r}")
        if posixpath.normpath(value.replace("~", "/h", 1)) in ("/", "/h"):
            raise ValueError(f"base_dir must be a folder of its own, not {value!r}")
        return value

    @field_validator("code_server_from")
    @classmethod
    def _check_code_server_from(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from seer.providers.code_server_upload import prepared_problem

        why = prepared_problem(value)
        if why:
            raise ValueError(why)
        return os.path.abspath(os.path.expanduser(value))

    @field_validator("python")
    @classmethod
    def _check_python(cls, value: str) -> str:
        return check_interpreter(value)

    @property
    def address(self) -> str:
        """``user@host:port`` (``... via user@jump:port`` through a jump host), for messages."""
        via = f" via {self.jump.address}" if self.jump is not None else ""
        return f"{self.user}@{self.host}:{self.port}{via}"

    def key_path(self) -> str | None:
        return os.path.expanduser(self.key_file) if self.key_file else None

    def known_hosts_path(self) -> Path:
        return Path(os.path.expanduser(self.known_hosts))

    @classmethod
    def resolve(cls, raw: dict[str, Any]) -> Self:
        """``provider_options`` with a host named in the hosts file filled in from it (the
        config's own fields win)."""
        entry = named_hosts().get(str(raw.get("host", "")))
        return cls.model_validate(
            {**entry, **raw, "host": entry.get("host", raw.get("host"))} if entry else raw
        )


def hosts_file() -> Path:
    """The user's hosts file (it need not exist)."""
    override = os.environ.get("SEER_SSH_HOSTS_FILE")
    if override:
        return Path(override).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "seer" / "ssh-hosts.toml"


def named_hosts() -> dict[str, dict[str, Any]]:
    """The hosts file's entries by name (``{}`` without one). A malformed file is an error that
    names it."""
    path = hosts_file()
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: not a readable TOML hosts file: {exc}") from None
    hosts = data.get("hosts", {})
    if not isinstance(hosts, dict) or not all(isinstance(v, dict) for v in hosts.values()):
        raise ValueError(f"{path}: expected [hosts.<name>] tables")
    return {name: {"host": name, **entry} for name, entry in hosts.items()}


def command_line_hosts() -> list[SshOptions]:
    """Hosts from ``$SEER_SSH_HOSTS`` (``user@host:port``, comma-separated) and every entry of the
    hosts file. An entry that does not parse is an error naming it."""
    out = []
    for name, entry in named_hosts().items():
        try:
            out.append(SshOptions.model_validate(entry))
        except ValidationError as exc:
            raise ValueError(f"{hosts_file()}: host {name!r}: {exc}") from None
    for spec in filter(None, (s.strip() for s in os.environ.get("SEER_SSH_HOSTS", "").split(","))):
        user, _, rest = spec.rpartition("@")
        host, _, port = rest.partition(":") if rest.count(":") == 1 else (rest, "", "")
        data: dict[str, Any] = {"host": host}
        if user:
            data["user"] = user
        if port:
            data["port"] = port
        try:
            out.append(SshOptions.resolve(data))
        except ValidationError as exc:
            raise ValueError(f"SEER_SSH_HOSTS: {spec!r}: {exc}") from None
    return out

"""seer-ssh's test kit: a real SSH "remote host" for testing against real OpenSSH.

:class:`SshHost` runs Debian's sshd in a container on the local Docker engine, on a free port of
127.0.0.1, with fresh host and user keys; see ``providers/ssh/README.md``. For pytest, import the
``ssh_host`` fixture from :mod:`seer_ssh.testing.pytest_plugin`.
"""

from seer_ssh.testing.host import (
    DEFAULT_BASE_IMAGE,
    HOST_LABEL,
    IMAGE_LABEL,
    ML_STACK,
    ExecResult,
    SshHost,
    SshHostError,
    client_pins,
    docker_client,
    engine_problem,
    free_port,
    host_image,
    host_recipe,
    new_ed25519_key,
    remove_host_images,
)

__all__ = [
    "DEFAULT_BASE_IMAGE",
    "HOST_LABEL",
    "IMAGE_LABEL",
    "ML_STACK",
    "ExecResult",
    "SshHost",
    "SshHostError",
    "client_pins",
    "docker_client",
    "engine_problem",
    "free_port",
    "host_image",
    "host_recipe",
    "new_ed25519_key",
    "remove_host_images",
]

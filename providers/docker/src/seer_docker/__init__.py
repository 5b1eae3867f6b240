"""seer-docker: sandboxes as Docker containers (``SandboxConfig(provider="docker")``)."""

from seer_docker.options import DockerOptions

__all__ = ["DockerOptions"]

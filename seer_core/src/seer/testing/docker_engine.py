"""What seer's Docker-backed test kits share: a client of the engine, why the engine cannot serve
here, tar archives for ``put_archive`` and build contexts, image builds from a Dockerfile (once per
engine, whatever the number of test processes), and the clean-up of what they built.

seer-ssh's hosts, seer-slurm's cluster and seer-modal's fake control plane realise their machines
as containers on the engine ``scripts/docker-engine`` starts; each used to carry its own copy of
these. The ``docker`` package is imported only when a function here is called (each kit's
``testing`` extra brings it), so importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docker import DockerClient

__all__ = [
    "build_lock",
    "build_once",
    "client_or",
    "docker_client",
    "engine_problem",
    "remove_images",
    "tar_archive",
]

#: How to start an engine (or build the base images) on a machine of seer's developers and CI.
ENGINE_HINT = "scripts/docker-engine"

_thread_lock = threading.Lock()


def docker_client(kit: str, extra: str, **options: Any) -> DockerClient:
    """A client of the engine ``DOCKER_HOST`` (or the local socket) names; ``options`` go to
    ``docker.from_env`` (a 300 s timeout unless given). Without the docker package, an
    ``ImportError`` saying that ``kit`` needs it and which ``extra`` brings it."""
    try:
        import docker
    except ModuleNotFoundError as exc:
        if exc.name != "docker":
            raise
        raise ImportError(
            f"{kit} realises its machines as Docker containers and needs the docker package: "
            f'pip install "{extra}"',
            name="docker",
        ) from None
    return docker.from_env(**{"timeout": 300, **options})


def engine_problem(client: Callable[[], DockerClient], base_image: str) -> str | None:
    """Why a kit cannot make its machines here: no engine answers, or it lacks ``base_image``;
    None when it can. ``client`` makes the client (the kit's :func:`docker_client`)."""
    try:
        engine = client()
        engine.ping()
    except Exception as exc:
        return f"no Docker engine answers ({type(exc).__name__}: {exc}); {ENGINE_HINT} starts one"
    from docker.errors import ImageNotFound

    try:
        engine.images.get(base_image)
    except ImageNotFound:
        return f"the Docker engine has no base image {base_image}; {ENGINE_HINT} builds it"
    finally:
        engine.close()
    return None


def tar_archive(files: Mapping[str, tuple[bytes, int]]) -> bytes:
    """A tar archive of ``{path: (data, mode)}`` (paths made relative), every entry owned by root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@contextlib.contextmanager
def client_or(client: DockerClient | None, make: Callable[[], DockerClient]) -> Iterator[DockerClient]:
    """``client`` as it is, or one made by ``make`` for the block and closed after it."""
    if client is not None:
        yield client
        return
    made = make()
    try:
        yield made
    finally:
        made.close()


@contextlib.contextmanager
def build_lock(name: str) -> Iterator[None]:
    """Held while the image ``name`` is looked up and built: across threads, and across processes
    (pytest-xdist's workers share the engine) through a lock file in the temporary folder."""
    path = Path(tempfile.gettempdir()) / f"seer-image-{name}.lock"
    with _thread_lock, open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(
    client: DockerClient,
    dockerfile: str,
    *,
    repo: str,
    label: str,
    failure: Callable[[str], Exception],
) -> str:
    """The tag of the image ``dockerfile`` describes (no context but the file itself), built
    first if the engine lacks it. The tag is ``repo:<hash of the Dockerfile>``, so a recipe finds
    its image and builds nothing, and the image carries ``label`` (its value the hash) for
    :func:`remove_images`. A failed build raises ``failure(message)``, the message naming the tag
    and ending with the build log's tail."""
    from docker.errors import ImageNotFound

    key = hashlib.sha256(dockerfile.encode()).hexdigest()[:20]
    tag = f"{repo}:{key}"
    with build_lock(f"{repo.replace('/', '-')}-{key}"):
        with contextlib.suppress(ImageNotFound):
            client.images.get(tag)
            return tag
        log: list[str] = []
        for chunk in client.api.build(
            fileobj=io.BytesIO(tar_archive({"Dockerfile": (dockerfile.encode(), 0o644)})),
            custom_context=True,
            tag=tag,
            labels={label: key},
            network_mode="host",
            rm=True,
            forcerm=True,
            decode=True,
        ):
            if "error" in chunk:
                tail = "".join(log[-20:]).rstrip()
                raise failure(f"{tag}: {chunk['error'].strip()}\n--- build log (tail) ---\n{tail}")
            log.append(str(chunk.get("stream") or ""))
        return tag


def remove_images(client: DockerClient, label: str) -> list[str]:
    """Remove every image carrying ``label`` that no container uses; their ids."""
    from docker.errors import APIError

    removed = []
    for image in client.images.list(filters={"label": label}):
        with contextlib.suppress(APIError):
            client.images.remove(str(image.id))
            removed.append(str(image.id))
    return removed

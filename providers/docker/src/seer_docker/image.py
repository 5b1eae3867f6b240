"""Sandbox images: a Dockerfile made from the config, built once per distinct content.

An image is the base image (or the image a repo's ``dockerfile`` builds, or a snapshot) plus
layers in an order that keeps rebuilds small: system packages, a virtual environment, the
config's heavy ML stack (torch, transformers: a layer configs share), seer's own dependencies with
the execution mode's, the config's other Python packages (a thin layer), and last seer's runtime
wheel (which changes whenever seer's source does). The tag is a hash of everything that goes in, so an
unchanged config finds its image and builds nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from seer.errors import SandboxError
from seer.providers import code_server as installer
from seer.providers.code_server import prepared_fingerprint, prepared_parts
from seer.providers.wheel import RuntimeWheel, runtime_requirements, runtime_wheel

if TYPE_CHECKING:
    from docker import DockerClient
    from seer.config import RepoConfig

__all__ = [
    "CODE_SERVER_INSTALLER",
    "CODE_SERVER_PREPARED",
    "HEAVY_PACKAGES",
    "HF_MOUNT",
    "IMAGE_REPO",
    "LABEL",
    "TOOLS_DIR",
    "VENV",
    "ImageBuildError",
    "PackageSources",
    "code_server_layer",
    "ensure_image",
    "forget_image",
    "prepared_fingerprint",
    "python_layers",
    "render_dockerfile",
]

#: The sandbox's Python environment inside the image.
VENV = "/opt/seer/venv"
#: Where the model cache (volume or host folder) is mounted: the Hugging Face hub cache.
HF_MOUNT = "/opt/seer/hf-hub"
#: Where the image's code-server layer installs it (``Machine.tools_dir`` of a docker sandbox).
TOOLS_DIR = "/opt/seer/tools"
#: The code-server installer's name in the build context (:mod:`seer.providers.code_server`).
CODE_SERVER_INSTALLER = "seer-code-server-install.py"
#: The prepared code-server install's folder in the build context (``code_server_from``).
CODE_SERVER_PREPARED = "seer-code-server"
#: Parts of a prepared install (relative to its root) the image does not get: the npm shim (it
#: names the client's path, and only the install ran it) and npm's download cache.
#: What building code-server's native modules needs (Debian names), installed in its layer.
CODE_SERVER_BUILD_PACKAGES = installer.BUILD_PACKAGES
#: Repository of the images seer builds; the tag is their content hash.
IMAGE_REPO = "seer-sandbox"
#: Label on everything seer makes (containers, images, volumes); its value says what it is.
LABEL = "seer.managed"
#: Bump when the Dockerfile's shape changes, so images built by an older seer are not reused.
RECIPE = "2"

Log = Callable[[str], None]


class ImageBuildError(SandboxError):
    """An image build (or the pull of its base) failed; the message ends with the build's log."""


#: The heavy ML stack: the config's requirements on these projects get a layer of their own,
#: below everything else, so configs that differ in their other packages share it (Docker's
#: build cache reuses a layer whose parent and instruction are the same).
HEAVY_PACKAGES = frozenset(
    {"torch", "torchvision", "torchaudio", "transformers", "accelerate", "safetensors", "tokenizers"}
)
#: What execution modes and the model fetcher add to the config's packages: installed with seer's
#: runtime requirements, in the layer every config of a mode shares.
SERVICE_PACKAGES = frozenset(
    {"jupyter-server", "ipykernel", "jupyterlab", "jupyter-collaboration", "huggingface-hub"}
)
#: torch's own projects: what a CPU sandbox takes as CPU builds.
TORCH_PACKAGES = frozenset({"torch", "torchvision", "torchaudio"})


@dataclass(frozen=True)
class PackageSources:
    """Where the image's ``pip install`` steps look for packages, and for which build of torch.

    ``find_links``: wheel folders (paths inside the image) or URLs, given to every install as
    ``--find-links``. ``torch_index``: an index that offers CPU builds of torch (PyTorch's CPU
    wheel index, or a mirror of it). ``cpu_torch``: the sandbox has no GPU, so torch comes as
    a CPU build where one is reachable (no CUDA libraries: about 2 GB less to download).
    """

    find_links: tuple[str, ...] = ()
    torch_index: str | None = None
    cpu_torch: bool = False

    def flags(self) -> list[str]:
        return [f"--find-links={link}" for link in self.find_links]


def _name(requirement: str) -> str | None:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        return str(canonicalize_name(Requirement(requirement).name))
    except InvalidRequirement:
        return None


def python_layers(python_packages: Iterable[str], sources: PackageSources) -> list[str]:
    """The ``RUN`` lines that install the config's Python packages and seer's runtime needs.

    Three layers, heaviest and least changing first: the config's requirements on the heavy ML
    stack (:data:`HEAVY_PACKAGES`), seer's runtime requirements with what the execution mode
    adds (:data:`SERVICE_PACKAGES`), then the rest (a thin layer per config). Two configs that
    differ only in their other packages build only the thin layer.

    With ``sources.cpu_torch``, the heavy layer first installs torch (without its dependencies)
    from the CPU sources only: ``torch_index`` if set, else no index at all, just the
    ``find_links`` folders and those of the image's pip configuration. pip then resolves the
    rest against that torch, whose CPU build names no ``nvidia-*`` dependency. Where no CPU
    build is reachable the layer says so and pip takes torch from its index as before; where one
    was installed and an ``nvidia-*`` package still came in (another package forced a torch pip
    could only find as a CUDA build), the build fails and says why.
    """
    packages = list(python_packages)
    heavy = [p for p in packages if _name(p) in HEAVY_PACKAGES]
    service = [p for p in packages if _name(p) in SERVICE_PACKAGES]
    rest = [p for p in packages if p not in heavy and p not in service]
    pip = f"{VENV}/bin/python -m pip install"
    flags = sources.flags()
    lines = []
    if heavy:
        install = shlex.join([*flags, *heavy])
        torch = [p for p in heavy if _name(p) in TORCH_PACKAGES]
        if sources.cpu_torch and torch:
            where = [f"--index-url={sources.torch_index}"] if sources.torch_index else ["--no-index"]
            cpu = shlex.join(["--no-deps", *where, *flags, *torch])
            lines.append(
                f"RUN if {pip} {cpu}; then cpu=1; else cpu=0; echo 'seer: no CPU build of torch is "
                "reachable (set provider_options.find_links or torch_index); pip takes torch from "
                f"its index'; fi && {pip} {install} && {{ [ $cpu = 0 ] || ! {VENV}/bin/python -m pip "
                "list --format=freeze | grep -i '^nvidia-' || { echo 'seer: a CUDA build of torch came "
                "in although the sandbox has no GPU and a CPU build was installed: a package needs "
                "a torch version the CPU sources lack' >&2; exit 1; }; }"
            )
        else:
            lines.append(f"RUN {pip} {install}")
    lines.append(f"RUN {pip} {shlex.join([*flags, *service, *runtime_requirements()])}")
    if rest:
        lines.append(f"RUN {pip} {shlex.join([*flags, *rest])}")
    return lines


def code_server_layer(prepared: bool = False) -> list[str]:
    """The Dockerfile lines of the ``debug`` layer: code-server (VS Code in the browser) in
    :data:`TOOLS_DIR`. It comes right after ``FROM``, so every ``debug=True`` config on one base
    image shares it (built once), and a start finds code-server installed.

    By default the layer builds code-server with :mod:`seer.providers.code_server` and the
    compilers its native modules need (minutes; needs apt and the package registries). With
    ``prepared`` it copies an install made on the client (``code_server_from``, put in the build
    context as :data:`CODE_SERVER_PREPARED`) and only checks that its Node runs on the base image.
    """
    if prepared:
        root = installer.layout(TOOLS_DIR)["root"]
        node = installer.layout(TOOLS_DIR)["node"]
        return [
            "# --- seer debug layer: code-server for debug=True, prepared on the client ---",
            f"COPY {CODE_SERVER_PREPARED}/ {root}/",
            f"RUN {node} --version >/dev/null || {{ echo 'seer: the prepared code-server install "
            "(provider_options.code_server_from) does not run on this base image: prepare it for "
            "the platform of the image: its architecture, and a glibc no newer than its own' >&2; exit 1; }",
        ]
    build = " ".join(CODE_SERVER_BUILD_PACKAGES)
    return [
        "# --- seer debug layer: code-server for debug=True (seer.providers.code_server) ---",
        f"COPY {CODE_SERVER_INSTALLER} /opt/seer/{CODE_SERVER_INSTALLER}",
        "RUN command -v apt-get >/dev/null || { echo 'seer: debug=True builds code-server and needs "
        "apt-get in the base image' >&2; exit 1; } && apt-get update -qq && apt-get install -y -qq "
        f"--no-install-recommends {build} && rm -rf /var/lib/apt/lists/* "
        # the installer fetches Node with pip: a throwaway venv has it where the base's python3 not
        "&& python3 -m venv /tmp/seer-installer "
        f"&& /tmp/seer-installer/bin/python /opt/seer/{CODE_SERVER_INSTALLER} {TOOLS_DIR} "
        "&& rm -rf /tmp/seer-installer",
    ]


def render_dockerfile(
    base: str,
    *,
    system_packages: Iterable[str],
    python_packages: Iterable[str],
    wheel_name: str,
    workdir: str,
    needs_git: bool = False,
    sources: PackageSources | None = None,
    code_server: bool = False,
    code_server_prepared: bool = False,
) -> str:
    """The Dockerfile of a sandbox image (its context holds the runtime wheel, and with
    ``code_server`` the code-server installer, or with ``code_server_prepared`` too the
    prepared install).

    ``needs_git``: install git from apt unless the base image has it (remote repos are cloned
    inside the sandbox). ``sources``: where pip looks besides its configured index, and whether
    torch must be a CPU build (see :func:`python_layers`). ``code_server``: add
    :func:`code_server_layer` (``debug=True``), built in the image or, with
    ``code_server_prepared``, copied from the context.
    """
    system = " ".join(shlex.quote(p) for p in system_packages)
    lines = [
        f"FROM {base}",
        "ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore",
    ]
    if code_server:
        lines += code_server_layer(prepared=code_server_prepared)
    if system:
        lines.append(
            "RUN command -v apt-get >/dev/null || { echo 'seer: system_packages need apt-get in the "
            "base image' >&2; exit 1; } && apt-get update -qq && apt-get install -y -qq "
            f"--no-install-recommends {system} && rm -rf /var/lib/apt/lists/*"
        )
    if needs_git:
        lines.append(
            "RUN command -v git >/dev/null || { command -v apt-get >/dev/null && apt-get update -qq "
            "&& apt-get install -y -qq --no-install-recommends git ca-certificates "
            "&& rm -rf /var/lib/apt/lists/*; } "
            "|| { echo 'seer: remote repos need git in the image' >&2; exit 1; }"
        )
    lines += [
        # What every sandbox needs of its base: bash (commands run through it) and Python >= 3.11.
        "RUN command -v bash >/dev/null || { echo 'seer: the base image has no bash' >&2; exit 1; } "
        "&& command -v python3 >/dev/null || { echo 'seer: the base image has no python3' >&2; exit 1; } "
        "&& python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' "
        '|| { echo "seer: the base image\'s python3 is older than 3.11" >&2; exit 1; }',
        # --system-site-packages: what the base image already has (torch in a CUDA image) counts.
        f"RUN python3 -m venv --system-site-packages {VENV}",
        *python_layers(python_packages, sources or PackageSources()),
        f"COPY {wheel_name} /opt/seer/wheels/{wheel_name}",
        f"RUN {VENV}/bin/python -m pip install --no-deps --force-reinstall /opt/seer/wheels/{wheel_name}",
        f"RUN mkdir -p {shlex.quote(workdir)} {HF_MOUNT}",
        f"ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
        f"VIRTUAL_ENV={VENV} PYTHONUNBUFFERED=1",
        f"WORKDIR {workdir}",
    ]
    return "\n".join(lines) + "\n"


def _stream_build(stream: Iterable[dict[str, Any]], log: Log) -> str | None:
    """Pass a build's (or pull's) JSON lines to ``log``; return its image id, raise on an error."""
    image_id = None
    tail: list[str] = []
    for chunk in stream:
        if "error" in chunk:
            raise ImageBuildError(
                f"{chunk['error'].strip()}\n--- build log (tail) ---\n" + "".join(tail[-30:]).rstrip()
            )
        text = chunk.get("stream") or chunk.get("status") or ""
        if text:
            if chunk.get("progress"):
                text = f"{text} {chunk['progress']}"
            tail.append(text if text.endswith("\n") else text + "\n")
            for line in text.splitlines():
                log(line)
        aux = chunk.get("aux")
        if isinstance(aux, dict) and aux.get("ID"):
            image_id = aux["ID"]
    return image_id


def _context(files: dict[str, bytes], trees: dict[str, Path] | None = None) -> BinaryIO:
    """The build context as a tar: ``files`` (name: content) and ``trees`` (name: a folder on the
    client, its :func:`prepared_parts`, links kept as links). With trees it is written to an
    unnamed temporary file, streamed to the engine from disk (a prepared code-server is ~840 MB);
    the caller closes it, which deletes it."""
    # returned open: the caller closes it (with ... as), which deletes the file
    fh: BinaryIO = tempfile.TemporaryFile(prefix="seer-context-") if trees else io.BytesIO()  # noqa: SIM115
    try:
        with tarfile.open(fileobj=fh, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
            for name, root in (trees or {}).items():
                tar.add(root, arcname=name, recursive=False, filter=_owned_by_root)
                for path in prepared_parts(root):
                    arcname = f"{name}/{path.relative_to(root).as_posix()}"
                    tar.add(path, arcname=arcname, recursive=False, filter=_owned_by_root)
        fh.seek(0)
    except BaseException:
        fh.close()
        raise
    return fh


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


#: Sandbox images this process found or built, as (engine address, tag): a start whose inputs give
#: a tag seen here does not ask the engine again (one call less per start). A tag removed since
#: fails the container's create with ImageNotFound; the provider then calls :func:`forget_image`
#: and :func:`ensure_image` again, which asks the engine and builds what is missing.
_present: set[tuple[str, str]] = set()


def _engine_key(client: DockerClient) -> str:
    return str(getattr(client.api, "base_url", ""))


def forget_image(client: DockerClient, tag: str) -> None:
    """Forget that sandbox image ``tag`` was on the engine (it was removed since it was seen)."""
    _present.discard((_engine_key(client), tag))


def _image_id(client: DockerClient, ref: str) -> str | None:
    from docker.errors import ImageNotFound

    try:
        return str(client.images.get(ref).id)
    except ImageNotFound:
        return None


def resolve_base(client: DockerClient, ref: str, *, pull: bool, log: Log) -> str:
    """The id of base image ``ref``, pulled first if the engine lacks it (and ``pull``)."""
    from docker.errors import APIError

    found = _image_id(client, ref)
    if found:
        return found
    if not pull:
        raise ImageBuildError(f"base image {ref!r} is not on the Docker engine, and pull is off")
    log(f"pulling {ref}")
    repo, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
    try:
        _stream_build(client.api.pull(repo, tag=tag or "latest", stream=True, decode=True), log)
    except APIError as exc:
        raise ImageBuildError(f"could not pull base image {ref!r}: {exc.explanation or exc}") from None
    found = _image_id(client, ref)
    if not found:
        raise ImageBuildError(f"base image {ref!r} is still missing after the pull")
    return found


def _clone(repo: RepoConfig, dest: Path) -> str:
    """Clone ``repo`` on the client (the build context comes from here); return the commit."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ImageBuildError(f"git {shlex.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout.strip()

    # "--" ends git's options: a URL or ref is never read as one, whatever the config let by.
    git("clone", "--quiet", "--", repo.clone_url, str(dest))
    if repo.ref:
        git("-C", str(dest), "checkout", "--quiet", repo.ref, "--")
    return git("-C", str(dest), "rev-parse", "HEAD")


def build_repo_image(client: DockerClient, repo: RepoConfig, *, base: str | None, log: Log) -> str:
    """Build the image of a repo's ``dockerfile``; return its id. Cached by commit and file."""
    assert repo.dockerfile is not None
    with tempfile.TemporaryDirectory(prefix="seer-docker-repo-") as tmp:
        src = Path(tmp) / "repo"
        commit = _clone(repo, src)
        dockerfile = src / repo.dockerfile
        if not dockerfile.is_file():
            raise ImageBuildError(f"repos: {repo.url} has no {repo.dockerfile} at {commit[:12]}")
        key = hashlib.sha256(
            json.dumps([RECIPE, repo.clone_url, commit, repo.dockerfile, base]).encode()
        ).hexdigest()
        tag = f"{IMAGE_REPO}:repo-{key[:16]}"
        found = _image_id(client, tag)
        if found:
            log(f"image of {repo.url}'s {repo.dockerfile} is cached ({tag})")
            return found
        log(f"building {repo.url}'s {repo.dockerfile} at {commit[:12]}")
        stream = client.api.build(
            path=str(src),
            dockerfile=repo.dockerfile,
            tag=tag,
            labels={LABEL: "image", "seer.image.source": repo.url},
            buildargs={"BASE_IMAGE": base} if base else None,
            network_mode="host",
            rm=True,
            forcerm=True,
            decode=True,
        )
        _stream_build(stream, log)
    built = _image_id(client, tag)
    if not built:
        raise ImageBuildError(f"the build of {repo.url}'s {repo.dockerfile} left no image {tag}")
    return built


def ensure_image(
    client: DockerClient,
    *,
    base_id: str,
    system_packages: list[str],
    python_packages: list[str],
    workdir: str,
    log: Log,
    needs_git: bool = False,
    code_server: bool = False,
    code_server_from: str | None = None,
    wheel: RuntimeWheel | None = None,
    sources: PackageSources | None = None,
) -> tuple[str, bool]:
    """The sandbox image for these inputs, built only if the engine lacks it.

    ``code_server_from``: with ``code_server``, a tools folder on the client holding a complete
    install (``provider_options.code_server_from``), copied into the image rather than built
    there; its :func:`prepared_fingerprint` is part of the image's key.

    Returns ``(tag, built)``: ``built`` is False when the image was found (nothing was built).
    """
    wheel = wheel or runtime_wheel()
    prepared = code_server_from if code_server else None
    if prepared is not None and not installer.installed(prepared):
        raise ImageBuildError(
            f"provider_options.code_server_from: {prepared} no longer holds a complete install of "
            f"code-server {installer.VERSION}"
        )
    dockerfile = render_dockerfile(
        base_id,
        system_packages=system_packages,
        python_packages=python_packages,
        wheel_name=wheel.filename,
        workdir=workdir,
        needs_git=needs_git,
        sources=sources,
        code_server=code_server,
        code_server_prepared=prepared is not None,
    )
    files = {"Dockerfile": dockerfile.encode()}
    trees: dict[str, Path] = {}
    inputs = [RECIPE, dockerfile, wheel.sha256]
    if prepared is not None:
        trees[CODE_SERVER_PREPARED] = Path(installer.layout(prepared)["root"])
        inputs.append(prepared_fingerprint(prepared))
    elif code_server:
        files[CODE_SERVER_INSTALLER] = Path(installer.__file__).read_bytes()
        inputs.append(hashlib.sha256(files[CODE_SERVER_INSTALLER]).hexdigest())
    key = hashlib.sha256(json.dumps(inputs).encode()).hexdigest()
    tag = f"{IMAGE_REPO}:{key[:16]}"
    seen = (_engine_key(client), tag)
    if seen in _present or _image_id(client, tag):
        _present.add(seen)
        log(f"image {tag} is cached: nothing to build")
        return tag, False
    files[wheel.filename] = wheel.path.read_bytes()
    log(f"building image {tag}" + (f" (code-server copied from {prepared})" if prepared else ""))
    with _context(files, trees) as context:
        stream = client.api.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            labels={LABEL: "image", "seer.image.key": key},
            network_mode="host",
            rm=True,
            forcerm=True,
            decode=True,
        )
        _stream_build(stream, log)
    if not _image_id(client, tag):
        raise ImageBuildError(f"the build left no image {tag}")
    _present.add(seen)
    return tag, True

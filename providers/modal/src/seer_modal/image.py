"""The sandbox image, as a chain of ``modal.Image`` layers made from the config.

Modal caches every layer by its definition, so an unchanged config builds nothing on a second
start; the layers go from what changes least to what changes most, so a change rebuilds little:

1. the base: Modal's ``debian_slim`` with the client's Python minor version, a registry image
   (``provider_options.image``), or the image a repository's ``dockerfile`` builds;
   with ``debug=True``, code-server in :data:`TOOLS_DIR` right after it (:func:`code_server_layers`),
   so every debug config on one base shares it;
2. ``apt_install`` of ``system_packages`` (and git, when remote repos are cloned in the sandbox);
3. a virtual environment, :data:`VENV`, first on ``PATH`` (the base's Python beneath it);
4. ``uv_pip_install`` of ``python_packages`` with what seer's runtime needs; for a sandbox
   without a GPU that asks for torch, a layer before it installs torch's own packages from the
   CPU sources the options name (``torch_index``, ``find_links``), so no CUDA build (about 2 GB
   of ``nvidia-*`` packages) comes in (:func:`_python_packages`);
5. seer's runtime wheel (:func:`seer.providers.wheel.runtime_wheel`, a deterministic build of the
   client's own seer), sent inline as a context file of one layer (no mount to upload): it
   changes whenever seer's source does, and then only this layer is built again.

Secrets never go into a layer: they reach the sandbox at creation (``modal.Secret.from_dict``).

Resolving the chain costs one round trip per layer even when Modal has them all; so the built
image's id is remembered on the client (:class:`ImageCache`, by the definition's inputs and the
Modal server and token), and a later start with the same definition names it in one call.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seer.errors import SandboxError
from seer.providers import code_server as installer
from seer.providers.wheel import RuntimeWheel, runtime_requirements, runtime_wheel
from seer.state import read_json, seer_home, write_json

if TYPE_CHECKING:
    from seer.config import RepoConfig
    from seer.providers.base import MachineSpec

    from seer_modal.options import ModalOptions

__all__ = ["HF_MOUNT", "PYTHON", "TOOLS_DIR", "VENV", "ImageCache", "code_server_layers", "sandbox_image"]

#: The sandbox's Python environment.
VENV = "/opt/seer/venv"
PYTHON = f"{VENV}/bin/python"
#: Where the model-cache volume is mounted: the Hugging Face hub cache.
HF_MOUNT = "/opt/seer/hf-hub"
#: Where the image's code-server layer puts it (``Machine.tools_dir`` of a modal sandbox).
TOOLS_DIR = "/opt/seer/tools"
#: The code-server installer's name in its layer's context (:mod:`seer.providers.code_server`).
_INSTALLER = "seer-code-server-install.py"
#: Where the uv of ``Image.uv_pip_install`` lives in the image (modal 1.6).
_UV = "/.uv/uv"


def _clone(repo: RepoConfig) -> str:
    """The repo checked out on the client (the build context of its ``dockerfile``), kept under
    ``$SEER_HOME/modal/repos`` by URL and ref: Modal reads the context when the image is built."""
    key = hashlib.sha256(json.dumps([repo.clone_url, repo.ref]).encode()).hexdigest()[:16]
    dest = seer_home() / "modal" / "repos" / key

    def git(*args: str) -> None:
        proc = subprocess.run(["git", *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SandboxError(f"repos: git {shlex.join(args)} failed: {proc.stderr.strip()}")

    if not (dest / ".git").is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        # "--" ends git's options: a URL or ref is never read as one.
        git("clone", "--quiet", "--", repo.clone_url, str(dest))
        if repo.ref:
            git("-C", str(dest), "checkout", "--quiet", repo.ref, "--")
    return str(dest)


def _base(spec: MachineSpec, options: ModalOptions) -> Any:
    import modal

    repo = next((r for r in spec.repos if r.dockerfile), None)
    if repo is not None:
        assert repo.dockerfile is not None
        context = _clone(repo)
        return modal.Image.from_dockerfile(f"{context}/{repo.dockerfile}", context_dir=context)
    if options.image:
        return modal.Image.from_registry(options.image)
    return modal.Image.debian_slim(python_version=options.python_version)


def code_server_layers(image: Any, prepared: str | None) -> Any:
    """``image`` with code-server (``debug=True``) in :data:`TOOLS_DIR`, as Modal builds and caches
    layers: copied from an install prepared on the client (``provider_options.code_server_from``,
    ``Image.add_local_dir(copy=True)``: its files are uploaded once, Modal keeps them by content),
    whose Node is run once to check it suits the base; or else built in the image by the installer,
    with the compilers its native modules need (minutes, once per base)."""
    where = installer.layout(TOOLS_DIR)
    if prepared is not None:
        root = installer.layout(prepared)["root"]
        copied = image.add_local_dir(root, where["root"], copy=True, ignore=_not_shipped)
        return copied.dockerfile_commands(
            [
                f"RUN {where['node']} --version >/dev/null || {{ echo 'seer: the prepared code-server "
                "install (provider_options.code_server_from) does not run on this base image: prepare "
                "it for the platform of the image: its architecture, and a glibc no newer than its own' >&2; "
                "exit 1; }",
            ]
        )
    return image.apt_install(*installer.BUILD_PACKAGES).dockerfile_commands(
        [
            f"ADD /{_INSTALLER} /opt/seer/{_INSTALLER}",
            # the installer fetches Node with pip: a throwaway venv has it where the base's python3 not
            f"RUN python3 -m venv /tmp/seer-installer && /tmp/seer-installer/bin/python "
            f"/opt/seer/{_INSTALLER} {TOOLS_DIR} && rm -rf /tmp/seer-installer",
        ],
        context_files={f"/{_INSTALLER}": installer.__file__},
    )


def _not_shipped(path: Path) -> bool:
    """What of a prepared install stays on the client (``add_local_dir``'s ``ignore``, given paths
    relative to the install)."""
    return bool(path.parts) and path.parts[0] in installer.PREPARED_SKIP


def sandbox_image(spec: MachineSpec, options: ModalOptions, wheel: RuntimeWheel | None = None) -> Any:
    """The ``modal.Image`` of a sandbox made from ``spec`` (a snapshot's image when it restores one)."""
    import modal

    if spec.snapshot is not None:
        image_id = spec.snapshot.data.get("image_id")
        if not image_id:
            raise SandboxError(f"snapshot {spec.snapshot.id} names no Modal image")
        return modal.Image.from_id(str(image_id))
    wheel = wheel or runtime_wheel()
    image = _base(spec, options)
    if spec.code_server:
        image = code_server_layers(image, options.code_server_from)
    system = list(spec.system_packages)
    if any(not r.clone_url.startswith(("/", "file://")) for r in spec.repos):
        system.append("git")  # core clones remote repos inside the sandbox
    if system:
        image = image.apt_install(*sorted(set(system)))
    image = image.dockerfile_commands(
        [
            # What every sandbox needs of its base: bash (commands run through it) and Python >= 3.11.
            "RUN command -v bash >/dev/null || { echo 'seer: the base image has no bash' >&2; exit 1; } "
            "&& python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' "
            "|| { echo 'seer: the base image needs python3 >= 3.11' >&2; exit 1; }",
            # --system-site-packages: what the base already has (torch in a CUDA image) counts.
            f"RUN python3 -m venv --without-pip --system-site-packages {VENV} && mkdir -p {HF_MOUNT}",
            # No PYTHONUNBUFFERED: with it, `python -` (exec_python) misreads long source lines
            # that reach stdin in pieces, as an exec's stdin does.
            f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH",
        ]
    )
    image = _python_packages(image, spec, options)
    target = f"/opt/seer/wheels/{wheel.filename}"
    return image.dockerfile_commands(
        [
            # ADD, not COPY: the SDK scans COPY lines for local sources to upload as a mount; the
            # wheel travels inline as a context file of this layer (ADD unpacks tars, not wheels).
            f"ADD /{wheel.filename} {target}",
            f"RUN {_UV} pip install --python {PYTHON} --no-deps --reinstall {target}",
            f"RUN mkdir -p {shlex.quote(options.workdir)}",
            f"WORKDIR {options.workdir}",
        ],
        context_files={f"/{wheel.filename}": str(wheel.path)},
    )


#: torch's own projects: what a sandbox without a GPU takes as CPU builds.
TORCH_PACKAGES = frozenset({"torch", "torchvision", "torchaudio"})


def _name(requirement: str) -> str | None:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        return str(canonicalize_name(Requirement(requirement).name))
    except InvalidRequirement:
        return None


def cpu_torch(spec: MachineSpec, options: ModalOptions) -> list[str]:
    """The config's requirements of torch's own projects that come as CPU builds: those of a
    sandbox without a GPU, when the options name a CPU source (``torch_index``, ``find_links``)."""
    if spec.gpu is not None or not (options.torch_index or options.find_links):
        return []
    return [p for p in spec.python_packages if _name(p) in TORCH_PACKAGES]


def _python_packages(image: Any, spec: MachineSpec, options: ModalOptions) -> Any:
    """The layers installing the config's packages with seer's runtime needs (``uv pip install``
    installs into the first python on PATH: the environment). For a sandbox without a GPU asking
    for torch, a layer before them installs torch's own projects without their dependencies from
    the CPU sources only (``torch_index`` if set, else no index: the ``find_links`` folders); the
    install after it keeps that torch and resolves the rest against it, whose CPU build names no
    ``nvidia-*`` package. A layer after checks that none came in (a package that forced a torch
    version the CPU sources lack) and fails the build saying so."""
    links = [f"--find-links={link}" for link in options.find_links]
    torch = cpu_torch(spec, options)
    if torch:
        where = f"--index-url={options.torch_index}" if options.torch_index else "--no-index"
        image = image.uv_pip_install(*torch, extra_options=shlex.join(["--no-deps", where, *links]))
    extra = " ".join(filter(None, [options.pip_options, shlex.join(links)]))
    image = image.uv_pip_install(*spec.python_packages, *runtime_requirements(), extra_options=extra)
    if torch:
        image = image.dockerfile_commands(
            [
                f"RUN ! {_UV} pip list --python {PYTHON} --format=freeze | grep -i '^nvidia-' || "
                "{ echo 'seer: a CUDA build of torch came in although the sandbox has no GPU: a "
                "package needs a torch version the CPU sources (torch_index, find_links) lack' >&2; "
                "exit 1; }"
            ]
        )
    return image


#: Bump when the layers' shape changes, so ids remembered by an older seer are not reused.
RECIPE = "2"


class ImageCache:
    """The ids of sandbox images this client had Modal build: ``$SEER_HOME/modal/images.json``.

    The key is everything the layers are made from (packages, base, options, the runtime wheel's
    hash) plus the Modal server and token id, since an image id means nothing to another
    workspace. A config whose base is a repository's Dockerfile is not remembered (the key would
    need the checkout). An id Modal no longer knows is forgotten by the caller, who builds again.
    """

    @property
    def path(self) -> Any:
        return seer_home() / "modal" / "images.json"

    @staticmethod
    def key(spec: MachineSpec, options: ModalOptions, wheel: RuntimeWheel) -> str | None:
        if spec.snapshot is not None or any(r.dockerfile for r in spec.repos):
            return None
        remote = any(not r.clone_url.startswith(("/", "file://")) for r in spec.repos)
        parts = [
            RECIPE,
            os.environ.get("MODAL_SERVER_URL", ""),
            os.environ.get("MODAL_TOKEN_ID", ""),
            os.environ.get("MODAL_PROFILE", ""),
            spec.python_packages,
            sorted(spec.system_packages),
            remote,
            options.image,
            options.python_version,
            options.pip_options,
            options.find_links,
            options.torch_index,
            cpu_torch(spec, options),
            options.workdir,
            wheel.sha256,
        ]
        if spec.code_server:  # which code-server layer: the prepared install's files, or a build
            prepared = options.code_server_from
            built = hashlib.sha256(Path(installer.__file__).read_bytes()).hexdigest()
            parts.append(installer.prepared_fingerprint(prepared) if prepared else built)
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def _read(self) -> dict[str, str]:
        with contextlib.suppress(OSError, ValueError):
            data = read_json(self.path)
            if isinstance(data, dict):
                return {str(k): str(v) for k, v in data.items()}
        return {}

    def get(self, key: str | None) -> str | None:
        return None if key is None else self._read().get(key)

    def put(self, key: str | None, image_id: str | None) -> None:
        if key is None:
            return
        data = self._read()
        if image_id:
            data[key] = image_id
        else:
            data.pop(key, None)
        write_json(self.path, data)

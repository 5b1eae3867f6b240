"""Python environments for local sandboxes: the local analogue of an image.

Every sandbox gets its own thin venv (a few milliseconds to make), so ``pip install`` inside a
sandbox never touches the client's environment or another sandbox. Through ``.pth`` files that
call ``site.addsitedir`` (so editable installs work too) it sees, behind its own site-packages:

1. a *layer* holding the ``python_packages`` the client lacks, built once per distinct package
   set and cached under ``$SEER_HOME/envs/<hash>``; pip is run against the layer with the
   client's site-packages visible, so anything the client already has, torch included, is never
   installed or downloaded again;
2. the client's own site-packages (where seer itself, at the client's version, lives).

When the client already satisfies every requirement, no layer is made at all: the sandbox runs on
the client's own Python, and no package index is needed. Where none can be reached (an offline GPU
box, a cluster's compute node: :func:`index_unreachable`), or where ``provider_options.python`` is
``"system"``, a requirement the client lacks is refused before anything is made
(:func:`python_problem`) instead of failing half-way through a start.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import venv
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import cast

from filelock import FileLock
from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from seer.errors import SandboxError
from seer.providers.offline import index_unreachable as index_unreachable  # (moved there; re-exported)

_COMPLETE = ".seer-env-complete"

#: Folders (or pages) of wheels the installers read besides an index: offline, they still serve.
_LOCAL_SOURCES = ("PIP_FIND_LINKS", "UV_FIND_LINKS")


def python_problem(
    requirements: list[str], python: str = "auto", env: Mapping[str, str] | None = None
) -> str | None:
    """Why the client's Python cannot serve a sandbox needing ``requirements`` (None: it can, or
    seer may install what it lacks).

    ``python="system"`` uses this Python as it is, so whatever it lacks is a problem; ``"auto"``
    installs what it lacks, unless no index can be reached and no local wheels
    (``PIP_FIND_LINKS`` / ``UV_FIND_LINKS``) are named. A path is another interpreter, used as it
    is: it must run, and have the requirements and this seer-core (its runtime runs there)."""
    if python not in ("auto", "system"):
        return _interpreter_problem(requirements, python)
    missing = unsatisfied(requirements)
    if not missing:
        return None
    env = os.environ if env is None else env
    listed = ", ".join(missing)
    if python == "system":
        return (
            f"provider_options python='system' runs the sandbox on this machine's Python "
            f"({sys.executable}) as it is, and it lacks: {listed}; install them into it "
            f"({sys.executable} -m pip install ...), or leave python at 'auto' so that seer builds "
            "an environment for them"
        )
    offline = index_unreachable(env)
    if offline and not any(env.get(name) for name in _LOCAL_SOURCES):
        return (
            f"this machine's Python ({sys.executable}) lacks: {listed}, and no package index can "
            f"be reached to install them ({offline}); install them into this Python, or name a "
            "folder of their wheels in PIP_FIND_LINKS, or leave them out of the config"
        )
    return None


def unsatisfied(requirements: list[str], interpreter: Interpreter | None = None) -> list[str]:
    """The requirements the client's environment (or ``interpreter``'s) does not already satisfy.

    Each named distribution is looked up on its own: listing every installed one would parse
    hundreds of metadata files on every ``start()``, with or without ``python_packages``."""
    if not requirements:
        return []
    env = interpreter.markers if interpreter else cast("dict[str, str]", default_environment())
    missing = []
    for raw in requirements:
        try:
            req = Requirement(raw)
        except InvalidRequirement:
            missing.append(raw)  # a URL or path: let pip decide
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        if req.url:
            missing.append(raw)
            continue
        if interpreter is None:
            version = _installed_version(req.name)
        else:
            version = interpreter.versions.get(canonicalize_name(req.name))
        if version is None or (req.specifier and not req.specifier.contains(version, prereleases=True)):
            missing.append(raw)
    return missing


def _installed_version(name: str) -> str | None:
    """The client's installed version of distribution ``name`` (None: not installed)."""
    try:
        return metadata.version(canonicalize_name(name))
    except metadata.PackageNotFoundError:
        return None


#: Run by another interpreter: the versions of the distributions named in argv, its site-packages
#: folders and its environment markers (what ``packaging.markers.default_environment`` gives),
#: with the standard library only.
_PROBE = r"""
import json, os, platform, site, sys
from importlib import metadata

def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None

dirs = list(site.getsitepackages())
user = site.getusersitepackages()
if site.ENABLE_USER_SITE and user and os.path.isdir(user):
    dirs.append(user)
dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and p not in dirs]
impl = sys.implementation
markers = {
    "implementation_name": impl.name,
    "implementation_version": "{0.major}.{0.minor}.{0.micro}".format(impl.version),
    "os_name": os.name,
    "platform_machine": platform.machine(),
    "platform_release": platform.release(),
    "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
}
print(json.dumps({"versions": {n: version(n) for n in sys.argv[1:]}, "markers": markers,
                  "sites": [d for d in dirs if os.path.isdir(d)], "minor": "%d.%d" % sys.version_info[:2]}))
"""


@dataclass(frozen=True)
class Interpreter:
    """What seer knows of a configured Python (``provider_options.python`` as a path)."""

    path: str
    #: canonical name -> installed version (None: not installed), for the names asked about
    versions: dict[str, str | None]
    markers: dict[str, str]
    sites: list[str]
    #: ``3.12``
    minor: str


def requirement_names(requirements: list[str]) -> list[str]:
    """The distribution names of ``requirements`` (URLs and paths left out)."""
    names = []
    for raw in requirements:
        with contextlib.suppress(InvalidRequirement):
            names.append(Requirement(raw).name)
    return names


def probe_interpreter(python: str, names: list[str]) -> Interpreter:
    """Ask the interpreter ``python`` for the versions of ``names`` and where its packages are.
    Raises :class:`SandboxError` saying why when it does not run or answer."""
    wanted = sorted({canonicalize_name(n) for n in names})
    try:
        proc = subprocess.run(
            [python, "-c", _PROBE, *wanted],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"the configured Python {python} could not be run: {exc}") from None
    try:
        facts = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (IndexError, ValueError):
        facts = None
    if not isinstance(facts, dict):
        raise SandboxError(
            f"the configured Python {python} did not answer seer's probe (exit {proc.returncode}): "
            f"{proc.stderr.strip()[-500:]}"
        )
    return Interpreter(python, facts["versions"], facts["markers"], facts["sites"], facts["minor"])


def _interpreter_problem(requirements: list[str], python: str) -> str | None:
    """What the configured interpreter ``python`` lacks of ``requirements`` and this seer-core."""
    from seer import __version__

    wanted = [*requirements, f"seer-core=={__version__}"]
    try:
        missing = unsatisfied(wanted, probe_interpreter(python, requirement_names(wanted)))
    except SandboxError as exc:
        return str(exc)
    if not missing:
        return None
    return (
        f"the configured Python ({python}) runs the sandbox as it is, and it lacks: {', '.join(missing)} "
        f"(seer-core at the client's version runs seer's side of the sandbox there); install them "
        f"into it ({python} -m pip install ...)"
    )


def _client_site_dirs() -> list[str]:
    dirs = list(site.getsitepackages())
    user = site.getusersitepackages()
    if site.ENABLE_USER_SITE and user and os.path.isdir(user):
        dirs.append(user)
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and p not in dirs]
    return [d for d in dirs if os.path.isdir(d)]


def env_key(requirements: list[str]) -> str:
    """The cache key of an env: the package set and the client interpreter it overlays."""
    from seer import __version__

    blob = json.dumps(
        {
            "requirements": sorted(requirements),
            "python": sys.executable,
            "version": sys.version,
            "sites": _client_site_dirs(),
            "seer": __version__,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _installer(env_python: Path) -> list[str]:
    try:
        import pip  # noqa: F401

        return [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(env_python),
            "install",
            "--disable-pip-version-check",
        ]
    except ImportError:
        pass
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--python", str(env_python)]
    raise SandboxError(
        "python_packages needs pip or uv in the client environment to install into the sandbox's "
        "environment; install one of them (pip install pip)"
    )


def _purelib(env_dir: Path, minor: str | None = None) -> Path:
    minor = minor or f"{sys.version_info.major}.{sys.version_info.minor}"
    return env_dir / "lib" / f"python{minor}" / "site-packages"


def _new_venv(env_dir: Path, pth_lines: list[str], base: Interpreter | None = None) -> Path:
    """A pip-less venv (of ``base``, default this interpreter) whose ``.pth`` runs ``pth_lines``;
    returns its interpreter."""
    if base is None:
        venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(env_dir)
    else:
        made = subprocess.run(
            [base.path, "-m", "venv", "--without-pip", "--clear", str(env_dir)],
            capture_output=True,
            text=True,
        )
        if made.returncode:
            raise SandboxError(
                f"{base.path} -m venv failed (exit {made.returncode}): {made.stderr.strip()[-500:]}"
            )
    purelib = _purelib(env_dir, base.minor if base else None)
    purelib.mkdir(parents=True, exist_ok=True)
    (purelib / "_seer_layers.pth").write_text("\n".join(pth_lines) + "\n")
    python = env_dir / "bin" / "python"
    # `pip` in the sandbox must install into the sandbox, not wherever PATH finds a pip.
    for name in ("pip", "pip3"):
        shim = env_dir / "bin" / name
        shim.write_text(
            f"#!{python}\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n"
        )
        shim.chmod(0o755)
    return python


def _addsitedir_lines(dirs: list[str]) -> list[str]:
    return [f"import site; site.addsitedir({d!r})" for d in dirs]


def make_sandbox_env(env_dir: Path, layer: Path | None, base: Interpreter | None = None) -> str:
    """The sandbox's own venv, seeing ``layer`` (if any) and the client's site-packages; or, with
    ``base``, a venv of that interpreter seeing its site-packages."""
    if base is not None:
        return str(_new_venv(env_dir, _addsitedir_lines(base.sites), base))
    dirs = [str(_purelib(layer))] if layer is not None else _client_site_dirs()
    return str(_new_venv(env_dir, _addsitedir_lines(dirs)))


def ensure_layer(
    requirements: list[str],
    envs_dir: Path,
    *,
    log: Callable[[str], None] = lambda line: None,
    env: Mapping[str, str] | None = None,
) -> Path | None:
    """The cached layer with what the client lacks of ``requirements`` (None: it lacks nothing).

    Thread- and process-safe: concurrent sandboxes with the same package set build it once.
    The installer runs with ``env`` (default: this process's environment).
    """
    missing = unsatisfied(requirements)
    if not missing:
        return None
    key = env_key(requirements)
    env_dir = envs_dir / key
    env_python = env_dir / "bin" / "python"
    envs_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(envs_dir / f"{key}.lock")):
        if (env_dir / _COMPLETE).is_file():
            return env_dir
        if env_dir.exists():  # a build that died half-way
            shutil.rmtree(env_dir)
        log(f"building a Python environment for {', '.join(missing)}")
        try:
            _new_venv(env_dir, _addsitedir_lines(_client_site_dirs()))
            cmd = [*_installer(env_python), *missing]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
            assert proc.stdout is not None
            tail: list[str] = []
            for line in proc.stdout:
                log(line.rstrip())
                tail = ([*tail, line.rstrip()])[-30:]
            if proc.wait() != 0:
                raise SandboxError(
                    f"installing python_packages {missing} failed (exit {proc.returncode}):\n"
                    + "\n".join(tail)
                )
            (env_dir / _COMPLETE).write_text(json.dumps({"requirements": requirements}))
        except BaseException:
            shutil.rmtree(env_dir, ignore_errors=True)
            raise
    return env_dir

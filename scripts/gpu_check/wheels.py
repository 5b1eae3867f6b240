"""The wheels seer needs on the GPU machine, fetched here (``--prepare``) and installed there offline.

The GPU machine has Python 3.12 with CUDA torch, transformers, peft, accelerate and huggingface_hub
(:data:`GPU_STACK`), and no package index. So ``--prepare`` (here, with an index) builds seer's own
members as wheels and downloads every other distribution they need that the stack does not bring,
for CPython 3.12 on x86-64 Linux, into ``.gpu-wheels/`` (ignored by git, carried to the machine).

Which distributions: uv resolves seer's requirements (:data:`REQUIREMENTS`) for that target, with
the versions the machine is known to have as constraints (:data:`GPU_IMAGE_PINS`); every
distribution of that closure the machine's image does not list (``gpu-image.txt``, read there) is
downloaded, pinned to the version resolved, with ``pip download --no-deps`` (each is named, so
nothing else comes). A resolution of the stack alone would not do: the newest transformers pulls
packages (pydantic, through typer) that the machine's older one does not, and seer needs them.
The whole working tree that travels with them must stay under :data:`TRAVEL_LIMIT`.

There, :func:`install_offline` makes a virtual environment that sees the machine's Python's own
site-packages behind its own (a ``.pth`` file, as seer's local provider does), and pip installs
seer into it from the wheels alone (``--no-index``): what the machine has is used as it is.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / ".gpu-wheels"
#: The workspace members built as wheels (folder -> distribution).
MEMBERS = {
    "seer_core": "seer-core",
    ".": "seer",
    "contrib/toolkit": "seer-toolkit",
    "plugins/mcp": "seer-mcp",
}
#: What the check installs on the GPU machine: core with models and notebooks, the toolkit, and the
#: mcp expose mode.
REQUIREMENTS = ["seer-core[models,notebook]", "seer", "seer-toolkit", "seer-mcp"]
#: What the GPU machine's Python is there for (with everything these need).
GPU_STACK = ["torch", "transformers", "peft", "accelerate", "huggingface_hub"]
#: Every distribution the GPU machine's image has, one name a line.
GPU_IMAGE = Path(__file__).with_name("gpu-image.txt")
#: Versions seen there (sessions' ``pip list``, 2026-11): the resolution keeps to them.
GPU_IMAGE_PINS = {
    "torch": "2.11.0",
    "transformers": "5.17.0",
    "huggingface-hub": "1.33.0",
    "accelerate": "1.15.0",
    "numpy": "2.5.2",
    "safetensors": "0.8.0",
    "tokenizers": "0.23.2",
    "triton": "3.6.0",
}
#: The GPU machine's interpreter and platform.
TARGET_PYTHON = "3.12"
#: manylinux tags a wheel for the target may carry (pip matches each exactly).
PLATFORMS = [
    "manylinux1_x86_64",
    "manylinux2010_x86_64",
    "manylinux2014_x86_64",
    *(f"manylinux_2_{n}_x86_64" for n in range(5, 40)),
    "linux_x86_64",
]
#: The most the working tree and the carried wheels may weigh together.
TRAVEL_LIMIT = 64 * 1024 * 1024


def _uv() -> list[str]:
    found = shutil.which("uv")
    if found:
        return [found]
    return [sys.executable, "-m", "uv"]


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, text=True, **kwargs)  # type: ignore[call-overload]


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _pins(text: str) -> dict[str, str]:
    """``{name: "name==version"}`` from ``uv pip compile`` output."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name = line.split("==", 1)[0].split("[", 1)[0].strip()
            out[_canonical(name)] = line.split(";", 1)[0].strip()
    return out


def image_packages() -> set[str]:
    """The distributions the GPU machine's image has (canonical names)."""
    lines = GPU_IMAGE.read_text().splitlines()
    return {_canonical(line.strip()) for line in lines if line.strip() and not line.startswith("#")}


def _compile(requirements: list[str], work: Path, name: str) -> dict[str, str]:
    source = work / f"{name}.in"
    source.write_text("\n".join(requirements) + "\n")
    constraints = work / f"{name}-constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in GPU_IMAGE_PINS.items()))
    result = subprocess.run(
        [
            *_uv(),
            "pip",
            "compile",
            "--quiet",
            "--no-header",
            "--no-annotate",
            "--python-version",
            TARGET_PYTHON,
            "--python-platform",
            "x86_64-manylinux_2_28",
            "--constraint",
            str(constraints),
            str(source),
        ],
        text=True,
        capture_output=True,
    )
    if result.returncode:
        raise SystemExit(
            f"gpu-check --prepare: uv could not resolve {', '.join(requirements)}:\n{result.stderr}"
        )
    return _pins(result.stdout)


def travelling_bytes() -> int:
    """What the working tree that travels weighs: tracked and untracked files git does not ignore."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    total = 0
    for name in listed:
        path = ROOT / os.fsdecode(name)
        if name and path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def prepare(dest: Path = WHEELS) -> int:
    """Fill ``dest`` with the wheels (see the module's docstring); 0 when they fit the limit."""
    started = time.monotonic()
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for folder in MEMBERS:
        _run([*_uv(), "build", "--wheel", "--quiet", "--out-dir", str(dest), str(ROOT / folder)])
    built = sorted(dest.glob("*.whl"))
    by_name = {_canonical(p.name.split("-", 1)[0]): p for p in built}
    missing = [d for d in MEMBERS.values() if _canonical(d) not in by_name]
    if missing:
        print(f"gpu-check --prepare: no wheel was built for {', '.join(missing)}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="gpu-check-prepare-") as tmp:
        work = Path(tmp)
        # The members by file, so the resolver takes them (and their pins on each other) from there.
        wanted = []
        for requirement in REQUIREMENTS:
            name, _, extras = requirement.partition("[")
            extra = f"[{extras}" if extras else ""
            wanted.append(f"{name}{extra} @ {by_name[_canonical(name)].resolve().as_uri()}")
        needed = _compile(wanted, work, "seer")
        present = image_packages() | {_canonical(d) for d in MEMBERS.values()}
        carry = sorted(pin for name, pin in needed.items() if name not in present)
        (work / "carry.txt").write_text("\n".join(carry) + "\n")
        platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                TARGET_PYTHON,
                "--implementation",
                "cp",
                *platforms,
                "--dest",
                str(dest),
                "--requirement",
                str(work / "carry.txt"),
            ]
        )
    wheels = sorted(dest.glob("*.whl"))
    weight = sum(p.stat().st_size for p in wheels)
    tree = travelling_bytes()
    manifest = [
        "# The wheels scripts/gpu-check installs on the GPU machine (scripts/gpu-check --prepare).",
        f"# seer's members: {', '.join(sorted(MEMBERS.values()))}; and what they need that the GPU",
        "# machine's image (scripts/gpu_check/gpu-image.txt) does not list.",
        *(f"{p.name}  {p.stat().st_size}" for p in wheels),
        f"# {len(wheels)} wheels, {weight / 2**20:.1f} MiB; working tree {tree / 2**20:.1f} MiB",
    ]
    (dest / "MANIFEST.txt").write_text("\n".join(manifest) + "\n")
    print(
        f"gpu-check --prepare: {len(wheels)} wheels ({weight / 2**20:.1f} MiB) in {dest} "
        f"in {time.monotonic() - started:.0f} s; with the working tree ({tree / 2**20:.1f} MiB) "
        f"{(weight + tree) / 2**20:.1f} MiB of the {TRAVEL_LIMIT / 2**20:.0f} MiB that may travel"
    )
    if weight + tree > TRAVEL_LIMIT:
        print("gpu-check --prepare: too large to travel to the GPU machine", file=sys.stderr)
        return 1
    return 0


def _base_site_dirs() -> list[str]:
    dirs = list(site.getsitepackages())
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and p not in dirs]
    return [d for d in dirs if os.path.isdir(d)]


def install_offline(venv_dir: Path, wheels: Path = WHEELS) -> Path:
    """A virtual environment at ``venv_dir`` over this Python's site-packages, with seer installed
    from ``wheels`` and no index; returns its interpreter."""
    if not any(wheels.glob("seer_core-*.whl")):
        raise SystemExit(
            f"gpu-check: no seer wheels in {wheels}; run scripts/gpu-check --prepare on a machine with a "
            "package index first, and carry that folder here"
        )
    shutil.rmtree(venv_dir, ignore_errors=True)
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv_dir)])
    python = venv_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    lines = [f"import site; site.addsitedir({d!r})" for d in _base_site_dirs()]
    Path(purelib, "_gpu_check_base.pth").write_text("\n".join(lines) + "\n")
    # pip comes from the machine's Python (through the .pth) and installs into the environment.
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-cache-dir",
            "--no-index",
            "--find-links",
            str(wheels),
            *REQUIREMENTS,
        ]
    )
    return python

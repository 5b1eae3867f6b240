"""``scripts/gpu-check``: every GPU path of seer in one run, each timed against the same work by hand.

    scripts/gpu-check --prepare      here, with a package index: the wheels for the GPU machine
    scripts/gpu-check                on the GPU machine, offline: install them, then check
    scripts/gpu-check --cpu          the same steps on the CPU, with the tiny model (CI runs this)

Options: ``--report FILE`` (markdown; default ``gpu-check-results/gpu-check-<gpu|cpu>.md``),
``--work DIR`` (default: a temporary folder, removed after), ``--no-install`` (use this Python as it
is, seer and all: a GPU workstation with seer installed), ``--install`` (with ``--cpu``: install
from the wheels first, as on the GPU machine). docs/gpu.md says what each row means.
Exit status: 0 when no row failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from gpu_check import steps, wheels
from gpu_check.kernel import FIRST_CELL, LOAD_BY_HAND
from gpu_check.report import Report, Row, check

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu-check"
#: Set in the environment of the check once seer is installed (the run goes on in that Python).
INSIDE = "GPU_CHECK_INSTALLED_S"
#: The model: about 1 B parameters on a GPU, the tiny one on the CPU.
SIZES = {True: "4GB", False: "0.4MB"}


def _isolate(work: Path) -> None:
    """Everything under ``work``, and offline: no model hub, no package index."""
    os.environ.update(
        SEER_HOME=str(work / "seer-home"),
        SEER_OUTPUTS_DIR=str(work / "outputs"),
        HF_HOME=str(work / "hf"),
        HF_HUB_OFFLINE="1",
        SEER_OFFLINE="1",
        PIP_NO_INDEX="1",
        UV_OFFLINE="1",
    )
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "PIP_FIND_LINKS", "UV_FIND_LINKS", "SEER_PROVIDER"):
        os.environ.pop(name, None)


def _build_models(report: Report, ctx_gpu: bool, work: Path) -> steps.Context | None:
    """The model (random weights, offline) and a LoRA adapter for it, in the hub cache."""
    from seer.testing.scale_model import ensure_scale_model
    from seer.testing.tiny_model import build_tiny_adapter, hub_cache_dir, install_in_hub_cache

    size = SIZES[ctx_gpu]
    with report.step(
        f"build a Llama-style model offline ({size} of float32 weights) and a LoRA adapter"
    ) as row:
        started = time.perf_counter()
        built = ensure_scale_model(work / "models", size)
        commit = install_in_hub_cache(built, steps.REPO_ID)
        adapter = build_tiny_adapter(work / "adapter", built, base_model_name_or_path=steps.REPO_ID)
        adapter_commit = install_in_hub_cache(adapter, steps.ADAPTER_ID)
        cache = hub_cache_dir()

        def snapshot(repo: str, commit: str) -> Path:
            return cache / ("models--" + repo.replace("/", "--")) / "snapshots" / commit

        model_dir = snapshot(steps.REPO_ID, commit)
        weights = sorted(model_dir.glob("*.safetensors"))
        weight = 0
        for path in weights:  # read once, so seer and the bare kernel both load from the page cache
            with path.open("rb") as fh:
                while chunk := fh.read(1 << 24):
                    weight += len(chunk)
        # And what both sides import, so that neither pays alone for a cold disk or compiling .pyc
        # files: the servers' modules, and everything loading a Llama and its first forward pass
        # import (a tiny one of the same architecture, loaded as both sides load theirs).
        warm = ensure_scale_model(work / "warm-model", SIZES[False])
        load = LOAD_BY_HAND.format(
            path=str(warm), dtype="bfloat16" if ctx_gpu else "float32", device="cuda:0" if ctx_gpu else "cpu"
        )
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import ipykernel.kernelapp, jupyter_server.serverapp, peft, torch, transformers\n"
                + load
                + FIRST_CELL,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        row.seer_s = time.perf_counter() - started
        params = f"{weight / 4 / 1e9:.2f} B" if weight > 4e8 else f"{weight / 4 / 1e6:.2f} M"
        row.notes.append(
            f"{params} parameters in {len(weights)} file(s); build time, no baseline; "
            "its files and the libraries read once, warm for both sides"
        )
        return steps.Context(
            gpu=ctx_gpu,
            work=work,
            model_dir=model_dir,
            adapter_dir=snapshot(steps.ADAPTER_ID, adapter_commit),
        )
    return None


def run_checks(gpu: bool, work: Path, report_path: Path) -> int:
    _isolate(work)
    title = "GPU check" if gpu else "GPU check, --cpu (the same steps on the CPU, tiny model)"
    report = Report(title)
    started = time.perf_counter()
    if os.environ.get(INSIDE):
        row_s = float(os.environ[INSIDE])
        report.rows.append(
            Row("install seer from .gpu-wheels, offline", seer_s=row_s, notes=["pip --no-index; no baseline"])
        )
    if gpu:
        import torch

        if not torch.cuda.is_available():
            print("gpu-check: torch sees no CUDA GPU here; run with --cpu", file=sys.stderr)
            return 2
        # This process keeps a CUDA context open for the whole run, as a GPU server's persistence
        # daemon keeps the driver up: otherwise whichever side first touches an idle card (seer's
        # kernel, in the seed 004 row) alone pays for bringing it up.
        first_use = time.perf_counter()
        torch.ones(1, device="cuda").sum().item()
        first_use = time.perf_counter() - first_use
    ctx = _build_models(report, gpu, work)
    if gpu and ctx is not None:
        report.rows[-1].notes.append(
            f"the card brought up once, before any timed step ({first_use:.2f} s), and held up by this "
            "process for the run"
        )
    if ctx is not None:
        steps.gpu_type(report, ctx)
        if gpu and ctx.gpu_type is None:
            report.rows[-1].notes.append("the steps below run with gpu=None (seer still loads onto the GPU)")
        steps.notebook_and_toolkit(report, ctx)
        if not any(row.step.startswith("toolkit") for row in report.rows):
            report.skip(
                "toolkit: steering, activations, patching, logit lens", "the notebook step failed before it"
            )
        steps.rpc_and_expose_modes(report, ctx)
        steps.hidden_adapter(report, ctx)
        steps.notebook_again(report, ctx)
        info = steps.summary(ctx)
    else:
        info = {}
    wall = time.perf_counter() - started + float(os.environ.get(INSIDE) or 0)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = ", ".join(f"{k} {v}" for k, v in info.items())
    text = (
        report.markdown()
        + f"\n{when}; {header}; {wall:.0f} s in all. "
        + ("Every row passed." if not report.failed else "Some rows FAILED.")
        + "\n"
    )
    print("\n" + text)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(text)
    print(f"gpu-check: the table is in {report_path}")
    return 1 if report.failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gpu-check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare", action="store_true", help="download the wheels for the GPU machine")
    parser.add_argument("--cpu", action="store_true", help="the same steps on the CPU with the tiny model")
    parser.add_argument("--report", type=Path, help="where the markdown table goes")
    parser.add_argument("--work", type=Path, help="working folder (kept); default: a temporary one")
    installing = parser.add_mutually_exclusive_group()
    installing.add_argument(
        "--install",
        action="store_true",
        default=None,
        help="install seer from .gpu-wheels, offline, into an environment over this Python "
        "(the default without --cpu)",
    )
    installing.add_argument(
        "--no-install",
        dest="install",
        action="store_false",
        help="use this Python as it is (the default with --cpu)",
    )
    args = parser.parse_args(argv)
    if args.prepare:
        return wheels.prepare()
    gpu = not args.cpu
    report_path = (
        args.report or ROOT / "gpu-check-results" / f"gpu-check-{'gpu' if gpu else 'cpu'}.md"
    ).resolve()
    work = args.work.resolve() if args.work else Path(tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        install = gpu if args.install is None else args.install
        if install and not os.environ.get(INSIDE):
            started = time.perf_counter()
            try:
                python = wheels.install_offline(work / "venv")
            except (subprocess.CalledProcessError, SystemExit) as exc:
                report = Report("GPU check" if gpu else "GPU check, --cpu")
                with report.step("install seer from .gpu-wheels, offline") as row:
                    row.seer_s = time.perf_counter() - started
                    if isinstance(exc, subprocess.CalledProcessError):
                        check(False, f"pip exited {exc.returncode}; its output above names what is missing")
                    check(False, str(exc))
                report_path.parent.mkdir(parents=True, exist_ok=True)
                report_path.write_text(report.markdown())
                print(report.markdown())
                return 1
            env = {**os.environ, INSIDE: f"{time.perf_counter() - started:.2f}"}
            again = [str(python), str(SCRIPT), "--work", str(work), "--report", str(report_path)]
            again += ["--cpu"] if args.cpu else []
            return subprocess.run(again, env=env).returncode
        return run_checks(gpu, work, report_path)
    finally:
        if not args.work and not os.environ.get(INSIDE):
            shutil.rmtree(work, ignore_errors=True)

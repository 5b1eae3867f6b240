"""seer at real model sizes: does its cost stay constant as the model grows?

Synthetic Llama-style checkpoints of ~0.4 MB, ~50 MB and ~500 MB (:mod:`seer.testing.scale_model`,
built once per run, sharded at 500 MB) are served by :class:`seer.testing.hub_server.HubServer` on
127.0.0.1, and seer is timed against a hand-written baseline in the same run, sample by sample:

* ``download``: seer's model fetcher (``seer.runtime.fetch.fetch_all``, what a sandbox runs) into
  an empty cache against a plain ``huggingface_hub.snapshot_download`` of the same repo (files in
  parallel, its default 8 workers). Target: seer's throughput >= 0.9x the plain one.
* ``cold start``: ``Sandbox.start()`` with the model in ``models`` and an empty Hugging Face cache
  + ``create_notebook_session`` + a first cell running the model, against ``snapshot_download``
  + a plain Jupyter kernel (``KernelManager``) + a cell doing ``from_pretrained`` + the same cell.
  Target at 500 MB: <= 1.15x.
* ``warm start``: the same with the cache already holding the model (both still ask the hub
  whether it changed, as they do by default). Target at 500 MB: <= 1.15x.
* ``load``: "weights on disk" -> "model usable in the kernel": seer's loader
  (``seer.runtime.loading.load_all`` + ``describe``, what the kernel runs at start) in a seer
  session against a bare ``from_pretrained`` in a plain kernel, both kernels warm (torch imported).
* docker ``cold start`` / ``warm start``: the same on the Docker provider with a host folder as
  the model cache, against ``containers.run`` of the same image + one ``python`` process in it
  doing ``snapshot_download`` + ``from_pretrained`` + the cell (no kernel: the baseline is lighter
  than a kernel, so the ratio is an upper bound). Skips with its reason without an engine.

``SEER_BENCH_SCALE_SIZES=0.4MB,50MB`` (or ``-k 50MB``) runs only some sizes for a quick check;
``SEER_BENCH_MODELS_DIR`` keeps the built checkpoints across runs (default: the run's temp folder).
The local lifecycle and the 16-sandbox burst are at the end of this file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _harness import BenchReport, Comparison, compare

pytest.importorskip("transformers")
pytest.importorskip("jupyter_client")

from seer import ModelConfig, Sandbox, SandboxConfig

GROUP = "scale"
ALL_SIZES = ("0.4MB", "50MB", "500MB")
SIZES = tuple(
    s.strip() for s in os.environ.get("SEER_BENCH_SCALE_SIZES", ",".join(ALL_SIZES)).split(",") if s.strip()
)
_unknown = sorted(set(SIZES) - set(ALL_SIZES))
if _unknown:  # a typo must not quietly run nothing
    raise ValueError(f"SEER_BENCH_SCALE_SIZES names unknown sizes {_unknown}; choose from {ALL_SIZES}")

#: The first cell: a forward pass, so the weights are really usable (its value: the vocabulary size).
CELL = "int(model(**tokenizer('The quick brown fox', return_tensors='pt')).logits.shape[-1])"
#: Cold and warm starts take seconds to a minute at 500 MB: a few samples each.
START_REPEAT = 3


def repo_id(size: str) -> str:
    return f"seer-bench/llama-{size.lower().replace('.', 'p')}"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The run's checkpoints, built (once) in a subprocess so this process never imports torch."""
    root = Path(os.environ.get("SEER_BENCH_MODELS_DIR") or tmp_path_factory.getbasetemp() / "scale-models")
    out: dict[str, Path] = {}
    for size in SIZES:
        proc = subprocess.run(
            [sys.executable, "-m", "seer.testing.scale_model", "--size", size, str(root)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        out[size] = Path(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.fixture(scope="module")
def hub(checkpoints: dict[str, Path]) -> Iterator[Any]:
    """Every checkpoint of the run on a loopback hub; this process's huggingface_hub points at it."""
    from seer.testing.hub_server import HubServer

    with HubServer({repo_id(s): path for s, path in checkpoints.items()}) as server, server.activate():
        yield server


def weight_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.glob("*.safetensors"))


def mb_per_s(nbytes: int, seconds: float) -> str:
    return f"{nbytes / seconds / 1e6:.0f} MB/s"


def fresh_dir(parent: Path, prefix: str) -> Path:
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def add(bench_report: BenchReport, cmp: Comparison) -> Comparison:
    assert cmp.seer.median > 0 and cmp.baseline.median > 0
    return bench_report.add(GROUP, cmp)


# --- download ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_bench_scale_download(
    bench_report: BenchReport, hub: Any, checkpoints: dict[str, Path], size: str, tmp_path: Path
) -> None:
    from huggingface_hub import snapshot_download
    from seer.runtime.fetch import fetch_all

    repo = repo_id(size)
    expected = weight_bytes(checkpoints[size])

    def with_seer() -> Path:
        cache = fresh_dir(tmp_path, "seer-")
        result = fetch_all({"cache_dir": str(cache), "models": [{"name": repo}]}, lambda event: None)
        assert result["ok"], result
        return Path(result["models"][0]["model"]["path"])

    def plain() -> Path:
        return Path(snapshot_download(repo, cache_dir=str(fresh_dir(tmp_path, "plain-"))))

    def check(snapshot: Path) -> None:
        assert weight_bytes(snapshot) == expected, snapshot  # (follows the snapshot's links to the blobs)
        assert (snapshot / "config.json").is_file() and (snapshot / "tokenizer.json").is_file()
        shutil.rmtree(snapshot.parents[2])  # the whole cache: the next sample starts empty

    cmp = compare(
        f"download {size}",
        seer=with_seer,
        baseline=plain,
        repeat=5 if size == "500MB" else 10,
        warmup=1,
        check_seer=check,
        check_baseline=check,
    )
    cmp.note = (
        f"seer {mb_per_s(expected, cmp.seer.median)}, plain snapshot_download "
        f"{mb_per_s(expected, cmp.baseline.median)}; throughput ratio {1 / cmp.ratio:.2f}x (target >= 0.9x)"
    )
    add(bench_report, cmp)


# --- cold and warm start, local -----------------------------------------------------------------


def _local_config(hub: Any, size: str, hf_home: Path) -> SandboxConfig:
    return SandboxConfig(
        timeout=900, models=[ModelConfig(name=repo_id(size))], env={**hub.env(), "HF_HOME": str(hf_home)}
    )


def _load_cell(path: str) -> str:
    return (
        "import torch\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
        f"model = AutoModelForCausalLM.from_pretrained({path!r}, dtype=torch.float32)\n"
        f"tokenizer = AutoTokenizer.from_pretrained({path!r})\n"
    )


class PlainKernel:
    """A Jupyter kernel started by hand: the baseline's notebook, nothing of seer."""

    def __init__(self, workdir: Path):
        from jupyter_client import KernelManager

        self.workdir = workdir
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=str(workdir))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)

    def run(self, code: str) -> str | None:
        """Run ``code``; its value (``text/plain``), raising if it failed."""
        values: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "execute_result":
                values.append(msg["content"]["data"]["text/plain"])
            elif msg["msg_type"] == "error":
                values.append("error: " + msg["content"]["evalue"])

        reply = self.kc.execute_interactive(code, timeout=600, output_hook=hook)
        assert reply["content"]["status"] == "ok", (reply["content"], values)
        return values[-1] if values else None

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


Started = tuple[str | None, Callable[[], None]]


def _seer_start(config: SandboxConfig, outputs: Path) -> Started:
    from seer.execution import create_notebook_session

    sandbox = Sandbox(config).start()
    try:
        session = create_notebook_session(sandbox, outputs_dir=outputs)
        result = session.exec(CELL)
        assert result.ok, result.error
    except BaseException:
        sandbox.terminate()
        raise

    def teardown() -> None:
        session.shutdown()
        sandbox.terminate()

    return result.result, teardown


def _plain_start(repo: str, cache: Path, workdir: Path) -> Started:
    from huggingface_hub import snapshot_download

    path = snapshot_download(repo, cache_dir=str(cache))
    kernel = PlainKernel(workdir)
    try:
        kernel.run(_load_cell(path))
        value = kernel.run(CELL)
    except BaseException:
        kernel.close()
        raise
    return value, kernel.close


def _check_started(cleanup: Callable[[], None] | None = None) -> Callable[[Started], None]:
    def check(out: Started) -> None:
        value, teardown = out
        teardown()
        if cleanup is not None:
            cleanup()
        assert value is not None and int(value) > 100, value

    return check


@pytest.mark.parametrize("size", SIZES)
def test_bench_scale_cold_start(bench_report: BenchReport, hub: Any, size: str, tmp_path: Path) -> None:
    repo = repo_id(size)
    homes: list[Path] = []

    def with_seer() -> Started:
        homes.append(fresh_dir(tmp_path / "hf", "seer-"))
        return _seer_start(_local_config(hub, size, homes[-1]), tmp_path / "outputs")

    def plain() -> Started:
        homes.append(fresh_dir(tmp_path / "hf", "plain-"))
        return _plain_start(repo, homes[-1] / "hub", fresh_dir(tmp_path / "work", "k-"))

    def drop_cache() -> None:
        shutil.rmtree(homes.pop())

    add(
        bench_report,
        compare(
            f"cold start {size} (local)",
            seer=with_seer,
            baseline=plain,
            repeat=START_REPEAT,
            warmup=1,
            check_seer=_check_started(drop_cache),
            check_baseline=_check_started(drop_cache),
            note="empty HF cache; baseline: snapshot_download + KernelManager + from_pretrained cell + "
            "the cell; target at 500MB <= 1.15x",
        ),
    )


@pytest.mark.parametrize("size", SIZES)
def test_bench_scale_warm_start(bench_report: BenchReport, hub: Any, size: str, tmp_path: Path) -> None:
    repo = repo_id(size)
    home = tmp_path / "hf"  # one cache both sides share: the first (untimed) start fills it

    add(
        bench_report,
        compare(
            f"warm start {size} (local)",
            seer=lambda: _seer_start(_local_config(hub, size, home), tmp_path / "outputs"),
            baseline=lambda: _plain_start(repo, home / "hub", fresh_dir(tmp_path / "work", "k-")),
            repeat=START_REPEAT,
            warmup=1,
            check_seer=_check_started(),
            check_baseline=_check_started(),
            note="model in the HF cache; target at 500MB <= 1.15x",
        ),
    )


# --- weights on disk -> model usable in the kernel ----------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_bench_scale_load(bench_report: BenchReport, hub: Any, size: str, tmp_path: Path) -> None:
    from seer.execution import create_notebook_session
    from seer.workspace import Workspace

    home = tmp_path / "hf"
    sandbox = Sandbox(_local_config(hub, size, home)).start()
    try:
        session = create_notebook_session(
            sandbox, Workspace(preload_models=False), outputs_dir=tmp_path / "out"
        )
        path = sandbox.model_handles[0].path
        seer_cell = (
            "from seer.runtime.loading import describe, load_all\n"
            "loaded = load_all()\ndescribe(loaded)\nmodel, tokenizer, _ = loaded['model']\n" + CELL
        )
        plain_cell = _load_cell(path) + CELL
        forget = "model = tokenizer = loaded = None; import gc; gc.collect()"
        kernel = PlainKernel(fresh_dir(tmp_path / "work", "k-"))
        try:
            kernel.run("import torch, transformers")
            session.exec("import torch, transformers")

            def with_seer() -> str | None:
                result = session.exec(seer_cell)
                assert result.ok, result.error
                return result.result

            def check_seer(value: str | None) -> None:
                assert session.exec(forget).ok
                assert value is not None and int(value) > 100, value

            def check_plain(value: str | None) -> None:
                kernel.run(forget)
                assert value is not None and int(value) > 100, value

            add(
                bench_report,
                compare(
                    f"weights on disk -> usable {size}",
                    seer=with_seer,
                    baseline=lambda: kernel.run(plain_cell),
                    repeat=5,
                    warmup=1,
                    check_seer=check_seer,
                    check_baseline=check_plain,
                    note="seer: load_all + describe in a seer session; baseline: from_pretrained in a "
                    "plain kernel; both warm, page cache warm",
                ),
            )
        finally:
            kernel.close()
            session.shutdown()
    finally:
        sandbox.terminate()
    _bench_loader_in_process(bench_report, size, path)


def _bench_loader_in_process(bench_report: BenchReport, size: str, path: str) -> None:
    """seer's loader alone against ``from_pretrained``, in this process: no kernel, no round trip
    in the figures, so what is left is what seer's loading code adds to reading the weights."""
    import torch
    from seer.runtime.loading import describe, load_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    entry = {"path": path, "var_name": "model", "name": repo_id(size)}

    def with_seer() -> Any:
        model, tokenizer = load_model(entry)
        describe({"model": (model, tokenizer, entry)})
        return model

    def plain() -> Any:
        AutoTokenizer.from_pretrained(path)
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)

    def check(model: Any) -> None:
        assert model.dtype == torch.float32 and model.config.hidden_size > 0

    add(
        bench_report,
        compare(
            f"loader alone {size} (in-process)",
            seer=with_seer,
            baseline=plain,
            repeat=10,
            warmup=1,
            check_seer=check,
            check_baseline=check,
            note="seer: load_model + describe; baseline: from_pretrained (model and tokenizer)",
        ),
    )


# --- cold and warm start, docker ----------------------------------------------------------------

DOCKER_IMAGE = os.environ.get("SEER_DOCKER_TEST_IMAGE", "seer-test-base:bookworm")
#: What a model-loading container needs (torch: the CPU wheel this machine keeps, as the Docker tests pin).
DOCKER_PACKAGES = ["torch==2.13.0", "transformers", "accelerate"]


@pytest.fixture(scope="module")
def docker_client() -> Any:
    pytest.importorskip("docker")
    from seer_docker.provider import DockerProvider
    from seer_docker.provider import docker_client as client

    availability = DockerProvider.availability()
    if not availability.usable:
        pytest.skip(f"no Docker engine: {availability.reason} (scripts/docker-engine starts one)")
    from docker.errors import ImageNotFound

    try:
        client().images.get(DOCKER_IMAGE)
    except ImageNotFound:
        pytest.skip(f"no base image {DOCKER_IMAGE} (scripts/docker-engine builds it)")
    return client()


def _docker_config(hub: Any, size: str, cache: Path) -> SandboxConfig:
    return SandboxConfig(
        provider="docker",
        timeout=900,
        python_packages=DOCKER_PACKAGES,
        models=[ModelConfig(name=repo_id(size))],
        env=hub.env(),
        provider_options={"image": DOCKER_IMAGE, "network": "host", "model_cache": str(cache)},
    )


_PLAIN_IN_CONTAINER = """
import sys, torch
from huggingface_hub import snapshot_download
from transformers import AutoModelForCausalLM, AutoTokenizer
path = snapshot_download(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
tokenizer = AutoTokenizer.from_pretrained(path)
print(CELL)
""".replace("CELL", CELL)


def _docker_plain(client: Any, image: str, hub: Any, repo: str, cache: Path) -> Started:
    container = client.containers.run(
        image,
        ["sleep", "900"],
        detach=True,
        auto_remove=True,
        init=True,
        network_mode="host",
        volumes={str(cache): {"bind": "/hf-hub", "mode": "rw"}},
    )
    try:
        out = container.exec_run(
            ["/opt/seer/venv/bin/python", "-c", _PLAIN_IN_CONTAINER, repo],
            environment={**hub.env(), "HF_HUB_CACHE": "/hf-hub"},
            demux=True,
        )
        assert out.exit_code == 0, out.output[1].decode()[-2000:]
        value = out.output[0].decode().strip().splitlines()[-1]
    except BaseException:
        container.remove(force=True)
        raise
    return value, lambda: container.remove(force=True)


def _drop_root_owned(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)  # written by the container's root; we may be root too
    assert not path.exists(), f"could not remove {path}"


@pytest.mark.parametrize("start", ["cold", "warm"])
@pytest.mark.parametrize("size", SIZES)
def test_bench_scale_docker_start(
    bench_report: BenchReport, docker_client: Any, hub: Any, size: str, start: str, tmp_path: Path
) -> None:
    repo = repo_id(size)
    caches: list[Path] = []
    warm_cache = fresh_dir(tmp_path / "hf", "warm-")
    image: list[str] = []

    def with_seer() -> Started:
        cache = warm_cache if start == "warm" else fresh_dir(tmp_path / "hf", "seer-")
        caches.append(cache)
        value, teardown = _seer_start(_docker_config(hub, size, cache), tmp_path / "outputs")
        if not image:  # the sandbox image seer built: the baseline runs the very same one
            from seer_docker.provider import DockerProvider

            (sandbox_id,) = [m.id for m in DockerProvider().list() if m.status.alive]
            image.append(docker_client.containers.get(sandbox_id).labels["seer.image"])
        return value, teardown

    def plain() -> Started:
        cache = warm_cache if start == "warm" else fresh_dir(tmp_path / "hf", "plain-")
        caches.append(cache)
        return _docker_plain(docker_client, image[0], hub, repo, cache)

    def drop_cache() -> None:
        cache = caches.pop()
        if start == "cold":
            _drop_root_owned(cache)

    try:
        add(
            bench_report,
            compare(
                f"{start} start {size} (docker)",
                seer=with_seer,
                baseline=plain,
                repeat=START_REPEAT,
                warmup=1,
                check_seer=_check_started(drop_cache),
                check_baseline=_check_started(drop_cache),
                note=f"{'empty' if start == 'cold' else 'filled'} host-folder cache; baseline: containers.run"
                " of the same image + one python doing snapshot_download + from_pretrained + the cell "
                "(no kernel); target at 500MB <= 1.15x",
            ),
        )
    finally:
        _drop_root_owned(warm_cache)


# --- many sandboxes at once ---------------------------------------------------------------------

BURST = 16


def test_bench_scale_local_burst(bench_report: BenchReport, tmp_path: Path) -> None:
    """16 local sandboxes started at once all come up, run a command, and are terminated."""
    from concurrent.futures import ThreadPoolExecutor

    from seer.providers.local import LocalProvider

    def one_sandbox(_: int) -> tuple[int, str]:
        sandbox = Sandbox(SandboxConfig(execution_mode="cli", timeout=600)).start()
        try:
            return sandbox.exec("echo $SEER_SANDBOX_ID").exit_code, sandbox.sandbox_id
        finally:
            sandbox.terminate()

    def by_hand(i: int) -> tuple[int, str]:
        workdir = Path(tempfile.mkdtemp(dir=tmp_path))
        proc = subprocess.run(["bash", "-c", "true"], cwd=workdir)
        shutil.rmtree(workdir)
        return proc.returncode, f"hand-{i}"

    def burst(fn: Callable[[int], tuple[int, str]]) -> Callable[[], list[tuple[int, str]]]:
        def run() -> list[tuple[int, str]]:
            with ThreadPoolExecutor(max_workers=BURST) as pool:
                return list(pool.map(fn, range(BURST)))

        return run

    def check(results: list[tuple[int, str]]) -> None:
        assert [code for code, _ in results] == [0] * BURST, results
        assert len({name for _, name in results}) == BURST, "every sandbox is its own"
        alive = {m.id for m in LocalProvider().list() if m.status.alive}
        assert not alive & {name for _, name in results}, "a burst sandbox outlived terminate()"

    add(
        bench_report,
        compare(
            f"{BURST} local sandboxes at once (start + exec + terminate)",
            seer=burst(one_sandbox),
            baseline=burst(by_hand),
            repeat=3,
            warmup=1,
            check_seer=check,
            check_baseline=check,
            note=f"{BURST} threads; baseline: mkdtemp + subprocess.run(bash -c true) + rmtree each",
        ),
    )

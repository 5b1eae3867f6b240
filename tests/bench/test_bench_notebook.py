"""Notebook sessions against doing the same by hand with jupyter_client.

What each row means:

* ``start -> first result (tiny model)``: ``Sandbox(config).start()`` with the tiny model in
  ``models``, ``create_notebook_session`` and one ``session.exec`` against a hand-written minimum:
  ``KernelManager.start_kernel``, one cell loading the same model with transformers
  (``AutoModelForCausalLM`` / ``AutoTokenizer.from_pretrained`` of the same directory), one cell
  reading from it, shutdown. seer's extra is the sandbox (its venv and supervisor), fetching the
  model through the Hub cache and writing the manifest, the Jupyter server, the REST calls and
  the websocket, and the notebook it writes. Target: at most 1.3x.
* ``start -> JupyterLab answers``: ``Sandbox(config).start()`` in notebook mode until
  ``jupyter_url``'s ``/lab`` serves JupyterLab (with the token), against ``jupyter lab`` started by
  hand, and again beside a bare kernel start (``KernelManager.start_kernel`` until it is ready):
  how long a person waits before they can watch.
* ``exec "1+1" round trip``: ``session.exec("1+1")`` against a ``BlockingKernelClient`` on the
  *same* kernel (its connection file from the server's runtime directory): execute, wait for
  the reply and for the kernel to go idle. seer's extra is the hop through the Jupyter server
  and the websocket, and rewriting the notebook (in the sandbox and its local mirror) after the
  cell. Target: at most 1.5x.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _harness import BenchReport, compare
from _kernels import raw_execute, raw_kernel_client

pytest.importorskip("jupyter_server")
pytest.importorskip("jupyter_client")
pytest.importorskip("websocket")
pytest.importorskip("transformers")

from seer import ModelConfig, Sandbox, SandboxConfig
from seer.execution import create_notebook_session

GROUP = "notebook"
MODEL_ID = "seer-testing/tiny-llama"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tiny model, installed in a private Hugging Face cache the sandboxes inherit."""
    root = tmp_path_factory.mktemp("tiny")
    build = "import sys\nfrom seer.testing.tiny_model import build_tiny_model as b\nb(sys.argv[1])"
    subprocess.run([sys.executable, "-c", build, str(root / "model")], check=True, capture_output=True)
    from seer.testing.tiny_model import install_in_hub_cache

    install_in_hub_cache(root / "model", MODEL_ID, cache_dir=root / "hf" / "hub")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HOME", str(root / "hf"))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.delenv("HF_HUB_CACHE", raising=False)
        yield root / "model"


def _config(models: bool) -> SandboxConfig:
    return SandboxConfig(timeout=600, models=[ModelConfig(name=MODEL_ID)] if models else [])


def _ready_kernel(tmp_path: Path) -> tuple[Any, Callable[[], None]]:
    """A bare kernel (``KernelManager``, a fresh working directory) started until it answers: its
    client, and how to tear it down."""
    from jupyter_client import KernelManager

    workdir = tempfile.mkdtemp(dir=tmp_path)
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=workdir)
    kc = km.client()

    def teardown() -> None:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        shutil.rmtree(workdir, ignore_errors=True)

    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
    except BaseException:
        teardown()
        raise
    return kc, teardown


def test_bench_start_to_first_result(bench_report: BenchReport, tiny_model: Path, tmp_path: Path) -> None:

    cell = "model.config.hidden_size"

    # Each side returns its first result and how to tear down; the check (untimed) tears down.
    def with_seer() -> tuple[str | None, Callable[[], None]]:
        sandbox = Sandbox(_config(models=True)).start()
        try:
            session = create_notebook_session(sandbox, outputs_dir=tmp_path / "outputs")
            result = session.exec(cell).result
        except BaseException:
            sandbox.terminate()
            raise

        def teardown() -> None:
            session.shutdown()
            sandbox.terminate()

        return result, teardown

    load = (
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        f"model = AutoModelForCausalLM.from_pretrained({str(tiny_model)!r})\n"
        f"tokenizer = AutoTokenizer.from_pretrained({str(tiny_model)!r})\n"
    )

    def by_hand() -> tuple[str | None, Callable[[], None]]:
        kc, teardown = _ready_kernel(tmp_path)
        try:
            reply = kc.execute_interactive(load, timeout=300, output_hook=lambda msg: None)
            assert reply["content"]["status"] == "ok", reply["content"]
            values: list[str] = []

            def hook(msg: dict[str, Any]) -> None:
                if msg["msg_type"] == "execute_result":
                    values.append(msg["content"]["data"]["text/plain"])

            kc.execute_interactive(cell, timeout=60, output_hook=hook)
        except BaseException:
            teardown()
            raise
        return (values[0] if values else None), teardown

    def check(out: tuple[str | None, Callable[[], None]]) -> None:
        result, teardown = out
        teardown()
        assert result == "64", result

    cmp = bench_report.add(
        GROUP,
        compare(
            "start -> first result (tiny model)",
            seer=with_seer,
            baseline=by_hand,
            repeat=3,
            warmup=1,
            check_seer=check,
            check_baseline=check,
            note="baseline: KernelManager + a cell loading the model with transformers + one cell "
            "(teardown untimed); target <= 1.3x",
        ),
    )
    assert cmp.seer.median > 0 and cmp.baseline.median > 0


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    sandbox = Sandbox(_config(models=False)).start()
    try:
        nb = create_notebook_session(sandbox, outputs_dir=tmp_path_factory.mktemp("outputs"))
        try:
            yield nb
        finally:
            nb.shutdown()
    finally:
        sandbox.terminate()


def test_bench_exec_round_trip(bench_report: BenchReport, session: Any) -> None:
    with raw_kernel_client(session) as kc:

        def check(value: str | None) -> None:
            assert value == "2", value

        cmp = bench_report.add(
            GROUP,
            compare(
                'exec "1+1" round trip',
                seer=lambda: session.exec("1+1").result,
                baseline=lambda: raw_execute(kc, "1+1"),
                repeat=100,
                warmup=5,
                check_seer=check,
                check_baseline=check,
                note="baseline: BlockingKernelClient on the same kernel (execute, reply, idle); "
                "target <= 1.5x",
            ),
        )
        assert cmp.seer.median > 0


def _lab_answers(url: str, deadline: float) -> bool:
    """Poll JupyterLab's page at ``url`` until it answers (True) or ``deadline`` passes."""
    import time
    import urllib.request

    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as page:
                if b"<title>JupyterLab</title>" in page.read():
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def test_bench_start_to_jupyterlab(bench_report: BenchReport, tmp_path: Path) -> None:
    """``start -> JupyterLab answers``: a notebook sandbox started until ``/lab`` (with the token)
    serves JupyterLab, against ``jupyter lab`` started by hand on a free port with a token (the same
    packages: JupyterLab with jupyter-collaboration) until its ``/lab`` answers."""
    import secrets
    import socket
    import time

    pytest.importorskip("jupyterlab")

    def with_seer() -> tuple[bool, Callable[[], None]]:
        sandbox = Sandbox(_config(models=False)).start()
        url = str(sandbox.jupyter_url).replace("/?token=", "/lab?token=")
        return _lab_answers(url, time.monotonic() + 120), sandbox.terminate

    def by_hand() -> tuple[bool, Callable[[], None]]:
        workdir = tempfile.mkdtemp(dir=tmp_path)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        token = secrets.token_urlsafe(16)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={port}",
                f"--IdentityProvider.token={token}",
                "--allow-root",  # as seer's server does (sandboxes often run as root)
                f"--ServerApp.root_dir={workdir}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        def teardown() -> None:
            proc.terminate()
            proc.wait(timeout=60)
            shutil.rmtree(workdir, ignore_errors=True)

        return _lab_answers(f"http://127.0.0.1:{port}/lab?token={token}", time.monotonic() + 120), teardown

    def check(out: tuple[bool, Callable[[], None]]) -> None:
        answered, teardown = out
        teardown()
        assert answered, "JupyterLab did not answer within 120s"

    cmp = bench_report.add(
        GROUP,
        compare(
            "start -> JupyterLab answers",
            seer=with_seer,
            baseline=by_hand,
            repeat=3,
            warmup=1,
            check_seer=check,
            check_baseline=check,
            note="baseline: `jupyter lab` by hand (token, free port) until /lab answers; "
            "seer: Sandbox(notebook mode).start() until jupyter_url's /lab answers",
        ),
    )
    assert cmp.seer.median > 0 and cmp.baseline.median > 0

    def bare_kernel() -> tuple[bool, Callable[[], None]]:
        return True, _ready_kernel(tmp_path)[1]

    beside = bench_report.add(
        GROUP,
        compare(
            "start -> JupyterLab answers, beside a bare kernel start",
            seer=with_seer,
            baseline=bare_kernel,
            repeat=3,
            warmup=1,
            check_seer=check,
            check_baseline=check,
            note="baseline: KernelManager.start_kernel + wait_for_ready (no server, no notebook); "
            "seer: Sandbox(notebook mode).start() until jupyter_url's /lab answers with the token",
        ),
    )
    assert beside.seer.median > 0 and beside.baseline.median > 0

"""The RPC layer (``ScopedSandbox.serve`` + ``RpcClient``) against the shape of the older system:
a single-threaded ``http.server.HTTPServer`` answering JSON, called with ``urllib`` (a new
connection per call), in the same run.

What each row means:

* ``no-op call``: one round trip of a function that returns ``None`` (target: under 1 ms).
* ``64 MiB float32 tensor``: a function returning a cached 16 Mi-element tensor; seer sends it
  as raw bytes and the client gets a tensor back; the baseline sends ``tensor.tolist()`` as JSON
  and the client rebuilds the tensor (target: at least 1 GB/s for seer; the note has both rates).
* ``8 concurrent calls of sleep(0.5)``: eight threads calling at once (target: at most 0.8 s;
  the single-threaded baseline serves them one after another, 4 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from _harness import BenchReport, compare, measure, scaled
from seer import SandboxConfig, ScopedSandbox
from seer.rpc import RpcClient

torch = pytest.importorskip("torch")

GROUP = "rpc"
ELEMENTS = 16 * 1024 * 1024  # 64 MiB of float32

FUNCTIONS = """
import time
import torch

BIG = torch.ones(ELEMENTS, dtype=torch.float32)


@expose
def noop():
    return None


@expose
def big():
    return BIG


@expose
def sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds
""".replace("ELEMENTS", str(ELEMENTS))

#: The older system's shape: one thread, JSON in and out, tensors as nested lists.
BASELINE = (
    FUNCTIONS.replace("@expose\n", "")
    + """
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

FUNCTIONS = {"noop": noop, "big": lambda: BIG.tolist(), "sleep": sleep}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        result = FUNCTIONS[self.path.rsplit("/", 1)[1]](*body.get("args", []), **body.get("kwargs", {}))
        out = json.dumps({"result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
)


@pytest.fixture(scope="module")
def seer_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RpcClient]:
    sandbox = ScopedSandbox(SandboxConfig(timeout=1800)).start()
    try:
        path = tmp_path_factory.mktemp("rpc-bench") / "bench_iface.py"
        path.write_text(FUNCTIONS)
        served = sandbox.serve(path, expose_as=None)
        with served.client(timeout=600) as client:
            yield client
    finally:
        sandbox.terminate()


@pytest.fixture(scope="module")
def baseline_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    script = tmp_path_factory.mktemp("rpc-baseline") / "baseline_server.py"
    script.write_text(BASELINE)
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _baseline_call(url: str, function: str, *args: Any) -> Any:
    request = urllib.request.Request(
        f"{url}/call/{function}",
        data=json.dumps({"args": list(args)}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())["result"]


def _in_threads(fn: Any, n: int) -> list[Any]:
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(fn())) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def test_bench_noop_round_trip(bench_report: BenchReport, seer_client: RpcClient, baseline_url: str) -> None:
    def check(result: Any) -> None:
        assert result is None

    cmp = bench_report.add(
        GROUP,
        compare(
            "no-op call",
            seer=lambda: seer_client.call("noop"),
            baseline=lambda: _baseline_call(baseline_url, "noop"),
            repeat=300,
            warmup=20,
            check_seer=check,
            check_baseline=check,
            note="baseline: single-threaded http.server + JSON, urllib client; target: seer < 1 ms",
        ),
    )
    cmp.note += f"; seer median {cmp.seer.median * 1e3:.3f} ms"


def test_bench_64mib_tensor(bench_report: BenchReport, seer_client: RpcClient, baseline_url: str) -> None:
    def check(result: Any) -> None:
        assert (
            isinstance(result, torch.Tensor) and result.dtype == torch.float32 and result.numel() == ELEMENTS
        )

    # seer alone first, with enough samples for a steady rate: the baseline's JSON of 16 Mi floats
    # takes gigabytes, after which the kernel has to reclaim memory for every large buffer.
    alone = measure(lambda: seer_client.call("big"), repeat=scaled(20), warmup=2, check=check)
    cmp = bench_report.add(
        GROUP,
        compare(
            "64 MiB float32 tensor",
            seer=lambda: seer_client.call("big"),
            baseline=lambda: torch.tensor(_baseline_call(baseline_url, "big"), dtype=torch.float32),
            repeat=3,
            warmup=1,
            check_seer=check,
            check_baseline=check,
        ),
    )
    size = ELEMENTS * 4
    cmp.note = (
        f"seer alone: median {alone.median * 1e3:.1f} ms = {size / alone.median / 1e9:.2f} GB/s over "
        f"{len(alone.samples)} calls (target >= 1 GB/s); interleaved with the baseline: "
        f"{size / cmp.seer.median / 1e9:.2f} GB/s; JSON lists {size / cmp.baseline.median / 1e9:.3f} GB/s"
    )


def test_bench_concurrent_calls(bench_report: BenchReport, seer_client: RpcClient, baseline_url: str) -> None:
    def check(results: list[Any]) -> None:
        assert results == [0.5] * 8, results

    started = time.perf_counter()
    cmp = bench_report.add(
        GROUP,
        compare(
            "8 concurrent calls of sleep(0.5)",
            seer=lambda: _in_threads(lambda: seer_client.call("sleep", 0.5), 8),
            baseline=lambda: _in_threads(lambda: _baseline_call(baseline_url, "sleep", 0.5), 8),
            repeat=3,
            warmup=0,
            check_seer=check,
            check_baseline=check,
        ),
    )
    cmp.note = (
        f"seer {cmp.seer.median:.3f} s wall for 8 x 0.5 s (target <= 0.8 s); the single-threaded "
        f"baseline {cmp.baseline.median:.2f} s; whole comparison {time.perf_counter() - started:.1f} s"
    )

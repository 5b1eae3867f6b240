"""seer-slurm against the same work by hand on the same test cluster (``seer_slurm.testing``).

``start -> first result``: ``Sandbox(config).start()`` (notebook mode: the job, the sandbox on its
node, JupyterLab and a kernel), ``create_notebook_session`` and one cell, against a hand-written
minimum with paramiko: ``sbatch`` a script that starts a Jupyter server on the node, wait for the
job to run, reach the node through the login node, forward the server's port, start a kernel
over REST and run one cell over its websocket. Teardown (``terminate()`` / ``scancel``) is
untimed. The environment both use is made once (the node image has Jupyter in its system Python;
seer's environment for the package set is made in the warm-up).

The time each job waited in the queue (SLURM's ``SubmitTime`` to ``StartTime``) is part of both
sides' times, and reported apart in the row's note: on the idle test cluster it is the scheduler's
reaction time, on a real cluster it is whatever the queue is.

Needs a Docker engine and the test base image (``scripts/docker-engine``); skips without them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import secrets
import select
import socket
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _harness import BenchReport, compare

pytest.importorskip("paramiko")
pytest.importorskip("websocket")

from seer import Sandbox, SandboxConfig

GROUP = "slurm provider"
CELL = "6 * 7"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from seer_slurm.testing import SlurmCluster
    from seer_ssh.testing import client_pins

    problem = SlurmCluster.problem()
    if problem:
        pytest.skip(f"no SLURM test cluster: {problem}")
    with SlurmCluster(python_packages=client_pins()) as started:
        yield started


def _queue_wait(cluster: Any, job_id: str) -> float:
    """Seconds the job waited in the queue, by SLURM's own record."""
    out = cluster.run(f"scontrol show job -o {job_id}").check().stdout
    times = dict(re.findall(r"\b(SubmitTime|StartTime)=(\S+)", out))

    def parse(text: str) -> float:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))

    return parse(times["StartTime"]) - parse(times["SubmitTime"])


class _Forward:
    """127.0.0.1:<port> here carried to 127.0.0.1:``remote`` on the node (paramiko channels)."""

    def __init__(self, transport: Any, remote: int):
        self.transport, self.remote = transport, remote
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                threading.Thread(target=self._carry, args=(client,), daemon=True).start()

    def _carry(self, client: socket.socket) -> None:
        try:
            chan = self.transport.open_channel("direct-tcpip", ("127.0.0.1", self.remote), ("127.0.0.1", 0))
        except Exception:  # the server is not listening yet: the client sees its connection close
            client.close()
            return
        with contextlib.suppress(OSError), client, chan:
            while True:
                ready, _, _ = select.select([client, chan], [], [], 5)
                for src, dst in ((client, chan), (chan, client)):
                    if src in ready:
                        data = src.recv(65536)
                        if not data:
                            return
                        dst.sendall(data)

    def close(self) -> None:
        self.listener.close()


def _run_cell(base: str, token: str, code: str) -> str | None:
    """Start a kernel over REST and run ``code`` over its websocket; the execute_result."""
    import websocket

    for _ in range(600):  # until the server answers
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2).read()
            break
        time.sleep(0.05)
    request = urllib.request.Request(f"{base}/api/kernels?token={token}", data=b"{}", method="POST")
    kernel = json.loads(urllib.request.urlopen(request, timeout=60).read())["id"]
    ws = websocket.create_connection(
        f"{base.replace('http', 'ws')}/api/kernels/{kernel}/channels?token={token}", timeout=120
    )
    try:
        msg_id = secrets.token_hex(8)
        ws.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "msg_type": "execute_request",
                        "username": "",
                        "session": "s",
                        "version": "5.3",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "content": {"code": code, "silent": False},
                    "channel": "shell",
                }
            )
        )
        while True:
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "execute_result":
                return str(msg["content"]["data"]["text/plain"])
            if msg["msg_type"] == "error":
                return None
    finally:
        ws.close()


def test_bench_start_to_first_result(bench_report: BenchReport, cluster: Any, tmp_path: Path) -> None:
    import paramiko
    from seer.execution import create_notebook_session

    waits: dict[str, list[float]] = {"seer": [], "by hand": []}
    config = SandboxConfig(provider="slurm", timeout=600, provider_options=cluster.options())

    def with_seer() -> tuple[str | None, Callable[[], None]]:
        sandbox = Sandbox(config).start(quiet=True)
        try:
            session = create_notebook_session(sandbox, outputs_dir=tmp_path / "outputs")
            result = session.exec(CELL).result
        except BaseException:
            sandbox.terminate()
            raise

        def teardown() -> None:
            waits["seer"].append(_queue_wait(cluster, sandbox.machine.job_id))  # type: ignore[attr-defined]
            session.shutdown()
            sandbox.terminate()

        return result, teardown

    def by_hand() -> tuple[str | None, Callable[[], None]]:
        login = paramiko.SSHClient()
        login.load_host_keys(str(cluster.known_hosts))
        login.connect(
            cluster.host,
            cluster.port,
            cluster.user,
            key_filename=str(cluster.key_path),
            allow_agent=False,
            look_for_keys=False,
        )
        token, port = secrets.token_hex(16), 20000 + secrets.randbelow(20000)
        script = (
            "#!/bin/sh\nexec python3 -m jupyter_server --ServerApp.ip=127.0.0.1 "
            f"--ServerApp.port={port} --IdentityProvider.token={token} --ServerApp.open_browser=False\n"
        )
        with login.open_sftp() as sftp, sftp.open("by-hand.sh", "w") as fh:
            fh.write(script)
        job = login.exec_command("sbatch --parsable --time=10 by-hand.sh")[1].read().decode().strip()
        closers: list[Callable[[], None]] = [
            lambda: login.exec_command(f"scancel {job}")[1].read(),
            login.close,
        ]

        def teardown() -> None:
            waits["by hand"].append(_queue_wait(cluster, job))
            for close in closers:
                close()

        try:
            while True:
                out = login.exec_command(f"squeue -h -j {job} -o '%T %N'")[1].read().decode().split()
                if out and out[0] == "RUNNING":
                    break
                time.sleep(0.1)
            show = login.exec_command(f"scontrol show node -o {out[1]}")[1].read().decode()
            addr = re.search(r"NodeAddr=(\S+)", show).group(1)  # type: ignore[union-attr]
            chan = login.get_transport().open_channel("direct-tcpip", (addr, 22), ("127.0.0.1", 0))  # type: ignore[union-attr]
            node = paramiko.SSHClient()
            node.load_host_keys(str(cluster.known_hosts))
            node.connect(
                addr,
                22,
                cluster.user,
                key_filename=str(cluster.key_path),
                sock=chan,
                allow_agent=False,
                look_for_keys=False,
            )
            forward = _Forward(node.get_transport(), port)
            closers[:0] = [forward.close, node.close]
            result = _run_cell(f"http://127.0.0.1:{forward.port}", token, CELL)
        except BaseException:
            teardown()
            raise
        return result, teardown

    def check(out: tuple[str | None, Callable[[], None]]) -> None:
        result, teardown = out
        teardown()
        assert result == "42", result

    cmp = compare(
        "start -> first result (notebook, one cell)",
        seer=with_seer,
        baseline=by_hand,
        repeat=3,
        warmup=1,
        check_seer=check,
        check_baseline=check,
        note="",
    )
    seer_wait = statistics.median(waits["seer"][1:] or waits["seer"])
    hand_wait = statistics.median(waits["by hand"][1:] or waits["by hand"])
    cmp = dataclasses.replace(
        cmp,
        note=(
            f"baseline: sbatch a Jupyter server, forward its port through the login node, one cell over "
            f"REST + websocket (teardown untimed); queue wait (SLURM's Submit->Start, median, included "
            f"in both): seer {seer_wait:.0f} s, by hand {hand_wait:.0f} s; target <= 1.3x"
        ),
    )
    bench_report.add(GROUP, cmp)
    assert cmp.seer.median > 0 and cmp.baseline.median > 0

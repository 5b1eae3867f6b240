"""The check's steps, each timed against the same work done by hand in the same run.

Every step fills one :class:`~gpu_check.report.Row`; a check that does not hold fails the row with
what was seen, and the next step still runs. Every sandbox is used in a ``with`` block, so none
outlives its step, failed or not.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_check.kernel import (
    FIRST_CELL,
    KERNEL_AGE,
    LOAD_BY_HAND,
    LOAD_PEFT_BY_HAND,
    TOOLKIT_CELL,
    bare_kernel,
    last_json,
)
from gpu_check.report import Report, Timer, check

REPO_ID = "gpu-check/llama"
#: The hidden adapter: its owner's name must appear nowhere the agent can look.
SECRET = "gpu-check-secret"
ADAPTER_ID = f"{SECRET}/hidden-adapter"
#: Seconds any one wait may take (a kernel's start, a model's load, one call).
LIMIT = 600.0
#: What a faked nvidia-smi reports in --cpu mode.
FAKE_CARD = "NVIDIA H100 80GB HBM3"


@dataclass
class Context:
    gpu: bool
    work: Path
    model_dir: Path
    adapter_dir: Path
    gpu_type: str | None = None
    #: the first cell's output in seer's notebook: device, dtype, shape and logits
    base_line: str = ""

    @property
    def device(self) -> str:
        return "cuda:0" if self.gpu else "cpu"

    @property
    def dtype(self) -> str:
        return "bfloat16" if self.gpu else "float32"


# --- the GPU type ------------------------------------------------------------------------------
def _fake_nvidia_smi(folder: Path) -> Path:
    """A ``nvidia-smi`` that names :data:`FAKE_CARD`, the one seam seer's GPU detection reads."""
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{FAKE_CARD}'\n")
    smi.chmod(0o755)
    return folder


def gpu_type(report: Report, ctx: Context) -> None:
    """``gpu`` naming another card is refused, naming the card found; the matching type accepted."""
    from seer import SandboxConfig
    from seer.config import GPU_CATALOGUE
    from seer.errors import ConfigError
    from seer.preflight import preflight
    from seer.providers.kit import detect_gpus, gpu_matches

    name = "gpu type: another card refused, the matching type accepted"
    saved_path = os.environ["PATH"]
    if not ctx.gpu:
        os.environ["PATH"] = f"{_fake_nvidia_smi(ctx.work / 'fake-bin')}{os.pathsep}{saved_path}"
    try:
        with report.step(name) as row:
            if not ctx.gpu:
                row.notes.append(f"--cpu: nvidia-smi faked to report {FAKE_CARD!r}")
            hand = Timer()
            with hand:
                smi = subprocess.run(
                    ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                )
            row.by_hand_s = hand.seconds
            found = detect_gpus()
            check(found, f"nvidia-smi names no GPU ({smi.stderr.strip() or smi.stdout.strip()})")
            card = found[0]
            matching = [k for k in GPU_CATALOGUE if gpu_matches(k, card)]
            check(matching, f"the card {card!r} matches no type in seer's GPU catalogue")
            other = next(k for k in ("A100", "H100", "L4") if not gpu_matches(k, card))
            try:
                preflight(SandboxConfig(gpu=other))
            except ConfigError as exc:
                text = str(exc)
                check("gpu" in exc.fields, f"refused, but not for gpu: {text}")
                check(
                    card in text and other in text,
                    f"the refusal does not name {other!r} and {card!r}: {text}",
                )
                row.notes.append(f"gpu={other!r} refused: {text.split(': ', 1)[-1]}")
            else:
                check(False, f"gpu={other!r} was accepted on a machine with {card!r}")
            seer = Timer()
            with seer:
                preflight(SandboxConfig(gpu=matching[0]))
            row.seer_s = seer.seconds
            row.notes.append(f"gpu={matching[0]!r} accepted on {card!r}")
            if ctx.gpu:
                ctx.gpu_type = matching[0]
    finally:
        os.environ["PATH"] = saved_path


def same_result(seer: str, by_hand: str, *, exact: bool) -> str:
    """How the first cell's output in seer's kernel matches the bare kernel's: ``"the same"``,
    ``"within 1e-3 of the"`` (device, dtype and shape equal, the logits' sum within 1e-3 of
    its size: GPU kernels may sum in another order in another process), or ``""`` (no match)."""
    a, b = seer.strip(), by_hand.strip()
    if a == b:
        return "the same"
    if exact:
        return ""
    (head_a, _, sum_a), (head_b, _, sum_b) = a.rpartition(" "), b.rpartition(" ")
    try:
        close = abs(float(sum_a) - float(sum_b)) <= 1e-3 * max(1.0, abs(float(sum_a)))
    except ValueError:
        return ""
    return "within 1e-3 of the" if head_a == head_b and close else ""


# --- the seed 004 notebook flow ------------------------------------------------------------------
def _phases(phases: dict[str, float]) -> str:
    """``"start 0.71 s, cell 0.05 s"``: where a side's time went, in the order measured."""
    return ", ".join(f"{name} {seconds:.2f} s" for name, seconds in phases.items())


def _setup_log(sandbox: Any) -> str:
    from seer.providers.local.provider import sandbox_dir

    log = sandbox_dir(sandbox.sandbox_id) / "logs" / "setup.log"
    return log.read_text() if log.is_file() else ""


def _info_says(info: str, ctx: Context) -> None:
    check(f"Device: {ctx.device}" in info, f"model_info_text does not say Device: {ctx.device}: {info!r}")
    check(f"Dtype: {ctx.dtype}" in info, f"model_info_text does not say Dtype: {ctx.dtype}: {info!r}")


def _seed_config(ctx: Context) -> Any:
    from seer import ExecutionMode, ModelConfig, SandboxConfig

    return SandboxConfig(
        execution_mode=ExecutionMode.NOTEBOOK,
        gpu=ctx.gpu_type,
        models=[ModelConfig(name=REPO_ID)],
        python_packages=["torch", "transformers", "accelerate"],
        toolkit=True,
        timeout=3600,
    )


def _seer_first_result(ctx: Context, row: Any) -> tuple[Any, Any, Any, str]:
    """Start the seed's sandbox and notebook and run its first cell; ``row.seer_s`` gets the time.
    Returns the sandbox (the caller terminates it), the session, the first cell's result and where
    the time went."""
    from seer import Sandbox, Workspace
    from seer.execution import create_notebook_session

    started = time.perf_counter()
    sandbox = Sandbox(_seed_config(ctx)).start()
    try:
        begun = time.perf_counter()
        session = create_notebook_session(sandbox, Workspace(), outputs_dir=ctx.work / "outputs")
        ready = time.perf_counter()
        first = session.exec(FIRST_CELL, timeout=LIMIT)
        row.seer_s = time.perf_counter() - started
        phases = {"start": begun - started, "session": ready - begun, "cell": started + row.seer_s - ready}
        age = session.exec(KERNEL_AGE, hidden=True, timeout=LIMIT)
        kernel_age = float(age.stdout.strip() or -1) if age.ok else -1.0
        where = _phases(phases)
        if kernel_age >= 0:  # when the kernel's process began, against the session's start
            lead = begun - (time.perf_counter() - kernel_age)
            where += f" (its kernel began {abs(lead):.2f} s {'before' if lead >= 0 else 'after'} it)"
    except BaseException:
        sandbox.terminate()
        raise
    return sandbox, session, first, where


def _by_hand_first_result(ctx: Context, row: Any) -> tuple[str, str]:
    """The same in a bare kernel loading the model by hand; ``row.by_hand_s`` gets the time.
    Returns what the cell printed and where the time went."""
    phases: dict[str, float] = {}
    row.by_hand_s, out = bare_kernel(
        LOAD_BY_HAND.format(path=str(ctx.model_dir), dtype=ctx.dtype, device=ctx.device),
        FIRST_CELL,
        LIMIT,
        phases,
    )
    return out, _phases(phases)


def notebook_and_toolkit(report: Report, ctx: Context) -> None:
    """Seed 004: start, first result, and the toolkit in the same kernel."""
    expected = f"{ctx.device} torch.{ctx.dtype}"
    with report.step(f"seed 004 notebook: start to first result (gpu={ctx.gpu_type!r})") as row:
        sandbox, session, first, seer_where = _seer_first_result(ctx, row)
        try:
            check(first.ok, f"the first cell failed: {first}")
            ctx.base_line = first.stdout.strip()
            check(ctx.base_line.startswith(expected), f"the model is not on {expected}: {ctx.base_line}")
            _info_says(session.model_info_text, ctx)
            check(
                "no environment to build: using this machine's Python" in _setup_log(sandbox),
                "the start did not say it used this machine's Python",
            )
            row.notes.append(f"model on {expected}, model_info_text says so; no environment built (offline)")
            hand_out, hand_where = _by_hand_first_result(ctx, row)
            row.notes.append(f"seer: {seer_where}; by hand: {hand_where}")
            how = same_result(ctx.base_line, hand_out, exact=not ctx.gpu)
            check(how, f"seer's first result {ctx.base_line!r} is not the bare kernel's {hand_out.strip()!r}")
            row.notes.append(f"{how} output as a bare kernel loading the model by hand")
            with report.step("toolkit: steering, activations, patching, logit lens") as tk:
                cell = session.exec(TOOLKIT_CELL, timeout=LIMIT)
                check(cell.ok, f"the toolkit cell failed: {cell}")
                data = last_json(cell.stdout)
                tk.seer_s, tk.by_hand_s = data["times"]["toolkit"], data["times"]["by_hand"]
                failed = [name for name, ok in data["checks"].items() if not ok]
                check(not failed, f"on {data['device']}: not as on CPU: {', '.join(failed)}")
                check(data["device"] == ctx.device, f"the toolkit ran on {data['device']}, not {ctx.device}")
                tk.notes.append(
                    f"{len(data['checks'])} exactness checks held on {data['device']} {data['dtype']}"
                )
            session.shutdown()
        finally:
            sandbox.terminate()


def notebook_again(report: Report, ctx: Context) -> None:
    """Seed 004 once more, both sides, in the same process: tells a cost of the first start on a
    machine (or in a process) from one of the flow itself."""
    with report.step("seed 004 notebook again: a second start, the same config") as row:
        sandbox, session, first, seer_where = _seer_first_result(ctx, row)
        try:
            check(first.ok, f"the first cell failed: {first}")
            line = first.stdout.strip()
            session.shutdown()
        finally:
            sandbox.terminate()
        hand_out, hand_where = _by_hand_first_result(ctx, row)
        check(
            same_result(line, hand_out, exact=not ctx.gpu),
            f"seer's first result {line!r} is not the bare kernel's {hand_out.strip()!r}",
        )
        row.notes.append(f"seer: {seer_where}; by hand: {hand_where}")


# --- RPC and the expose modes -------------------------------------------------------------------
INTERFACE = '''\
"""gpu-check's interface: the model on the GPU when there is one, and tensors from there."""
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

_device = "cuda:0" if torch.cuda.is_available() else "cpu"
_dtype = torch.bfloat16 if _device != "cpu" else torch.float32
model = AutoModelForCausalLM.from_pretrained(get_model_path({repo!r}), dtype=_dtype, device_map=_device)
tokenizer = AutoTokenizer.from_pretrained(get_model_path({repo!r}))


@expose
def where() -> str:
    """Where the model runs, and in what precision."""
    return f"{{model.device}} {{model.dtype}}"


@expose
def hidden(prompt: str, layer: int) -> torch.Tensor:
    """A layer's hidden states for a prompt, as the model's device holds them."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    with torch.no_grad():
        return model(**inputs, output_hidden_states=True).hidden_states[layer][0]


@expose
def block(mib: int) -> torch.Tensor:
    """A float32 tensor of mib MiB on the model's device: 0, 1, 2, ..."""
    return torch.arange(mib * 262144, dtype=torch.float32, device=model.device)
'''


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        step = sock.recv_into(view[got:], n - got)
        if not step:
            raise ConnectionError("the sender closed early")
        got += step
    return buf


def by_hand_transfer(mib: int, device: str) -> tuple[float, Any]:
    """The same tensor made on ``device``, copied to the host and sent over a loopback socket
    pair to this thread, as one would without seer; returns (seconds, the tensor received)."""
    import torch

    torch.zeros(1, device=device)  # CUDA's start-up is not part of the transfer
    left, right = socket.socketpair()

    def send() -> None:
        with left:
            data = torch.arange(mib * 262144, dtype=torch.float32, device=device).cpu().numpy().tobytes()
            left.sendall(len(data).to_bytes(8, "little") + data)

    started = time.perf_counter()
    sender = threading.Thread(target=send)
    sender.start()
    with right:
        size = int.from_bytes(_recv_exact(right, 8), "little")
        tensor = torch.frombuffer(_recv_exact(right, size), dtype=torch.float32)
    sender.join()
    return time.perf_counter() - started, tensor


def _agent_python(code: str, path: Path) -> str:
    """Run ``code`` in a fresh Python with ``path`` on sys.path, as an agent's script; its stdout."""
    env = {**os.environ, "PYTHONPATH": f"{path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=LIMIT
    )
    if proc.returncode:
        raise RuntimeError(f"exit {proc.returncode}: {proc.stderr[-1500:]}")
    return proc.stdout.strip()


def _mcp_where(config: dict[str, Any]) -> str:
    """List the tools of the MCP server ``config`` starts and call ``where``, with the mcp SDK's client."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    passed = ("SEER_HOME", "HF_HOME", "HF_HUB_OFFLINE", "SEER_OUTPUTS_DIR", "PATH")
    env = {k: os.environ[k] for k in passed if k in os.environ} | dict(config.get("env") or {})
    params = StdioServerParameters(command=config["command"], args=list(config["args"]), env=env)

    async def call() -> str:
        with anyio.fail_after(LIMIT):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                tools = {tool.name for tool in (await session.list_tools()).tools}
                check({"where", "hidden", "block"} <= tools, f"the MCP server lists {sorted(tools)}")
                result = await session.call_tool("where", {})
                check(not result.is_error, f"the MCP call failed: {result}")
                return " ".join(getattr(c, "text", "") for c in result.content)

    return anyio.run(call)


def rpc_and_expose_modes(report: Report, ctx: Context) -> None:
    """A served interface returning tensors from the model's device, and its four expose modes."""
    import torch
    from seer import ModelConfig, SandboxConfig, ScopedSandbox

    config = SandboxConfig(
        gpu=ctx.gpu_type,
        models=[ModelConfig(name=REPO_ID)],
        python_packages=["torch", "transformers"],
        timeout=3600,
    )
    expected = f"{ctx.device} torch.{ctx.dtype}"
    iface = ctx.work / "gpucheck_iface.py"
    iface.write_text(INTERFACE.format(repo=REPO_ID))
    mib = 256 if ctx.gpu else 16
    with ScopedSandbox(config) as scoped:
        with report.step(f"served interface: a {mib} MiB tensor from {ctx.device} over RPC") as row:
            served = scoped.serve(str(iface), expose_as=["library", "mcp", "prompt", "skill"])
            client = scoped.served["gpucheck_iface"].client(timeout=LIMIT)
            where = client.call("where")
            check(where == expected, f"the interface's model is on {where!r}, not {expected!r}")
            states = client.call("hidden", "The quick brown fox", 1)
            check(isinstance(states, torch.Tensor), f"hidden() returned a {type(states).__name__}")
            check(str(states.dtype) == f"torch.{ctx.dtype}", f"hidden() came back as {states.dtype}")
            client.call("block", 1)  # warm: the first call pays for imports
            seer = Timer()
            with seer:
                got = client.call("block", mib)
            want = torch.arange(mib * 262144, dtype=torch.float32)
            check(torch.equal(got, want), "the tensor that came back is not the one sent")
            hand_s, hand = by_hand_transfer(mib, ctx.device)
            check(torch.equal(hand, want), "the tensor sent by hand is not the one made")
            row.seer_s, row.by_hand_s = seer.seconds, hand_s
            size = mib * 2**20
            row.notes.append(
                f"model on {where}; RPC {size / seer.seconds / 1e6:.0f} MB/s, by hand (to host, "
                f"loopback socket) {size / hand_s / 1e6:.0f} MB/s"
            )
        with report.step("expose modes: library, mcp, prompt, skill") as row:
            times = {}
            seer = Timer()
            with seer:
                started = time.perf_counter()
                lib = served["library"]
                lib.install_into(ctx.work / "lib")
                got_lib = _agent_python(f"import {lib.name}\nprint({lib.name}.where())", ctx.work / "lib")
                times["library"] = time.perf_counter() - started
                check(got_lib == expected, f"library: where() gave {got_lib!r}")

                started = time.perf_counter()
                text = served["prompt"]
                snippets = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
                client_var = re.search(r"Call: `(\w+)\.call\(", text)
                check(snippets and client_var, f"prompt: no code to call the interface in {text[:300]!r}")
                assert client_var is not None
                got_prompt = _agent_python(
                    snippets[0] + f"\nprint({client_var.group(1)}.call('where'))\n", ctx.work
                ).splitlines()[-1]  # the snippet may print on its own
                times["prompt"] = time.perf_counter() - started
                check(got_prompt == expected, f"prompt: where() gave {got_prompt!r}")

                started = time.perf_counter()
                folder = served["skill"].install_into(ctx.work / "skills")
                got_skill = _agent_python("import gpucheck_iface\nprint(gpucheck_iface.where())", folder)
                times["skill"] = time.perf_counter() - started
                check(got_skill == expected, f"skill: where() gave {got_skill!r}")

                started = time.perf_counter()
                got_mcp = _mcp_where(dict(served["mcp"]))
                times["mcp"] = time.perf_counter() - started
                check(expected in got_mcp, f"mcp: where gave {got_mcp!r}")
            row.seer_s = seer.seconds
            # By hand: the same four calls, each from a fresh Python, on the RPC client alone.
            spec = json.dumps(scoped.served["gpucheck_iface"].to_dict())
            code = (
                "import json, sys\nfrom seer.rpc import ServedInterface\n"
                f"print(ServedInterface.from_dict(json.loads({spec!r})).client().call('where'))"
            )
            direct = Timer()
            with direct:
                for _ in range(4):
                    got = _agent_python(code, ctx.work)
                    check(got == expected, f"by hand: where() gave {got!r}")
            row.by_hand_s = direct.seconds
            row.notes.append(
                "each used as an agent uses it, in a fresh Python ("
                + ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
                + "); by hand: four fresh Pythons calling the RPC client directly"
            )


# --- the hidden PEFT adapter -------------------------------------------------------------------
PROBE = textwrap.dedent("""\
    import os, json
    print(json.dumps(dict(os.environ)))
    print(model.peft_config)
    print(model.config)
    print(getattr(model, "name_or_path", ""), type(model).__name__)
""")


def hidden_adapter(report: Report, ctx: Context) -> None:
    from seer import ExecutionMode, ModelConfig, Sandbox, SandboxConfig, Workspace
    from seer.execution import create_notebook_session

    config = SandboxConfig(
        execution_mode=ExecutionMode.NOTEBOOK,
        gpu=ctx.gpu_type,
        models=[ModelConfig(name=ADAPTER_ID, base_model=REPO_ID, is_peft=True, hidden=True)],
        python_packages=["torch", "transformers", "peft"],
        timeout=3600,
    )
    expected = f"{ctx.device} torch.{ctx.dtype}"
    with report.step(f"hidden PEFT adapter on its base, on {ctx.device}") as row:
        started = time.perf_counter()
        with Sandbox(config).start() as sandbox:
            session = create_notebook_session(sandbox, Workspace(), outputs_dir=ctx.work / "outputs")
            first = session.exec(FIRST_CELL, timeout=LIMIT)
            row.seer_s = time.perf_counter() - started
            check(first.ok, f"the first cell failed: {first}")
            line = first.stdout.strip()
            check(line.startswith(expected), f"the adapter's model is not on {expected}: {line}")
            _info_says(session.model_info_text, ctx)
            probe = session.exec(PROBE, hidden=True, timeout=LIMIT)
            check(probe.ok, f"the probe cell failed: {probe}")
            check("PeftModel" in probe.stdout, "the model is not a PeftModel")
            for where, text in (("model_info_text", session.model_info_text), ("the kernel", probe.stdout)):
                check(SECRET not in text, f"the hidden adapter's name shows in {where}")
            session.shutdown()
        hand_s, hand_out = bare_kernel(
            LOAD_PEFT_BY_HAND.format(
                base=str(ctx.model_dir), adapter=str(ctx.adapter_dir), dtype=ctx.dtype, device=ctx.device
            ),
            FIRST_CELL,
            LIMIT,
        )
        row.by_hand_s = hand_s
        how = same_result(line, hand_out, exact=not ctx.gpu)
        check(how, f"seer's logits {line!r} are not PeftModel's by hand {hand_out.strip()!r}")
        if ctx.base_line:
            check(
                not same_result(line, ctx.base_line, exact=False),
                "the adapter does not change the base's logits",
            )
        row.notes.append(
            f"PeftModel on {expected}, {how} logits as loaded by hand, unlike the base's; "
            f"its name in neither model_info_text nor the kernel"
        )


def summary(ctx: Context) -> dict[str, Any]:
    """What ran where: card, driver, library versions."""
    import seer
    import torch
    import transformers

    info: dict[str, Any] = {
        "seer": seer.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": sys.version.split()[0],
    }
    if ctx.gpu:
        info["card"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,persistence_mode", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        driver, _, persistence = smi.stdout.strip().partition(",")
        info["driver"] = driver.strip()
        info["persistence mode"] = persistence.strip() or "unknown"
    return info


__all__ = [
    "Context",
    "gpu_type",
    "hidden_adapter",
    "notebook_again",
    "notebook_and_toolkit",
    "rpc_and_expose_modes",
    "summary",
]

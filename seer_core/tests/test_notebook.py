"""Jupyter in the sandbox and notebook sessions, on the local provider.

Two sandboxes for the whole module: a plain one (most tests share one session on its
ahead-of-time kernel) and one whose kernels pre-load the tiny test model from a hand-written
manifest, with a workspace library. Every kernel and sandbox started here is shut down.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _images import tiny_png
from _notebook_kit import local_sandbox
from filelock import FileLock
from seer import ExecutionMode, Sandbox, SandboxConfig, SandboxStartError
from seer.errors import CellExecutionError, CellTimeoutError, KernelDiedError, NotebookError
from seer.execution import create_notebook_session
from seer.notebook import NO_MODELS_TEXT, JupyterClient, NotebookSession, strip_ansi
from seer.notebook.live import LiveNotebook

pytest.importorskip("jupyter_server")
pytest.importorskip("websocket")
nbformat = pytest.importorskip("nbformat")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MODEL_ID = "seer-testing/tiny-llama"


def _png() -> bytes:
    return tiny_png(2, 2, b"\xff\x00\x00")


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plain() -> Iterator[Sandbox]:
    with local_sandbox(timeout=600) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("seer-outputs")


@pytest.fixture(scope="module")
def nb(plain: Sandbox, outputs: Path) -> Iterator[NotebookSession]:
    with create_notebook_session(plain, name="main", outputs_dir=outputs) as session:
        yield session


def _tiny_model(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The tiny test model, built once per run (in a subprocess, so pytest never imports torch)
    into a directory every xdist worker shares."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import seer.testing.tiny_model as tiny_model

    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    key = hashlib.sha256(Path(tiny_model.__file__).read_bytes()).hexdigest()[:12]
    root = shared / f"seer-notebook-tiny-model-{key}"
    with FileLock(str(root) + ".lock"):
        if not (root / ".complete").is_file():
            build = "import sys\nfrom seer.testing.tiny_model import build_tiny_model as b\nb(sys.argv[1])"
            subprocess.run([sys.executable, "-c", build, str(root)], check=True, capture_output=True)
            (root / ".complete").write_text("ok")
    return root


@pytest.fixture(scope="module")
def with_models(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Sandbox]:
    """A sandbox configured with the tiny model (found offline in a private Hugging Face cache)."""
    pytest.importorskip("seer.runtime.loading")
    from seer import ModelConfig
    from seer.testing.tiny_model import install_in_hub_cache

    hf_home = tmp_path_factory.mktemp("hf-home")
    install_in_hub_cache(_tiny_model(tmp_path_factory, worker_id), MODEL_ID, cache_dir=hf_home / "hub")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HOME", str(hf_home))
        mp.delenv("HF_HUB_CACHE", raising=False)
        sandbox = Sandbox(SandboxConfig(timeout=600, models=[ModelConfig(name=MODEL_ID)])).start()
    try:
        yield sandbox
    finally:
        sandbox.terminate()


@pytest.fixture(scope="module")
def manifest(with_models: Sandbox) -> dict[str, Any]:
    """The sandbox's model manifest."""
    return dict(json.loads(with_models.read_file(with_models._env["SEER_MODELS_MANIFEST"])))


@pytest.fixture(scope="module")
def workspace() -> Any:
    from seer.workspace import Library, Workspace

    return Workspace(
        libraries=[Library.from_code("def answer():\n    return 42\n", "helpers")],
        custom_init_code="init_ran = init_ran + 1 if 'init_ran' in globals() else 1",
    )


@pytest.fixture(scope="module")
def mnb(with_models: Sandbox, workspace: Any, outputs: Path) -> Iterator[NotebookSession]:
    session = create_notebook_session(with_models, workspace, name="models", outputs_dir=outputs)
    try:
        yield session
    finally:
        session.shutdown()


def _notebook_file(session: NotebookSession) -> dict[str, Any]:
    assert session.sandbox is not None
    session.flush()
    text = session.sandbox.read_file(session.notebook_path)
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    # as nbformat reads it: the server writes multi-line strings as lists of lines
    return dict(json.loads(json.dumps(nb)))


def _sources(notebook: dict[str, Any]) -> list[str]:
    return ["".join(c["source"]) for c in notebook["cells"]]


# --- the Jupyter server ---------------------------------------------------------------------


def test_jupyter_answers_only_with_its_token(plain: Sandbox) -> None:
    service = plain._services["jupyter"]
    assert service["url"].startswith("http://127.0.0.1:")
    assert plain.jupyter_url == f"{service['url']}/?token={service['token']}"
    client = JupyterClient.from_url(plain.jupyter_url)
    assert client.request("GET", "/api/status")[0] == 200
    assert client.request("GET", "/api/status", token="")[0] == 403
    assert client.request("GET", "/api/kernels", token="")[0] == 403
    assert client.request("GET", "/api/status", token="not-the-token")[0] == 403
    # The browser form: the token in the query string.
    status, _ = client.request("GET", f"/api/status?token={service['token']}", token="")
    assert status == 200


def test_kernel_websocket_refused_without_token(plain: Sandbox, nb: NotebookSession) -> None:
    import websocket

    client = JupyterClient.from_url(plain.jupyter_url)
    url = client.ws_url(f"/api/kernels/{nb.kernel_id}/channels")
    with pytest.raises(websocket.WebSocketBadStatusException) as info:
        websocket.create_connection(url, timeout=10, suppress_origin=True)
    assert info.value.status_code == 403


def test_server_failure_names_the_step_and_shows_the_log(monkeypatch: pytest.MonkeyPatch) -> None:
    from seer.notebook import launch as builtin

    monkeypatch.setattr(builtin, "SERVER_LAUNCHER", "import sys\nprint('jupyter-boom')\nsys.exit(3)\n")
    with pytest.raises(SandboxStartError) as info:
        Sandbox(SandboxConfig(timeout=120)).start()
    assert info.value.step == "execution mode"
    assert "jupyter-boom" in str(info.value)


def test_server_starts_in_prepare_when_packages_come_later(monkeypatch: pytest.MonkeyPatch) -> None:
    # A machine whose packages are installed by the packages step cannot start Jupyter early.
    from seer.providers.local.provider import LocalProvider

    create = LocalProvider.create

    def create_without_packages(self: LocalProvider, spec: Any) -> Any:
        machine = create(self, spec)
        machine.packages_installed = False
        return machine

    monkeypatch.setattr(LocalProvider, "create", create_without_packages)
    with Sandbox(SandboxConfig(timeout=120)) as sandbox:
        assert not sandbox.machine.packages_installed
        assert JupyterClient.from_url(sandbox.jupyter_url).status()["kernels"] == 0  # type: ignore[arg-type]
        assert sandbox._services["jupyter"]["warm_kernel"] is None


def test_cli_sandbox_has_no_notebook(tmp_path: Path) -> None:
    with Sandbox(SandboxConfig(execution_mode=ExecutionMode.CLI, timeout=120)) as sandbox:
        assert sandbox.jupyter_url is None
        with pytest.raises(NotebookError, match="execution_mode"):
            create_notebook_session(sandbox, outputs_dir=tmp_path)


# --- running cells --------------------------------------------------------------------------


def test_stdout_stderr_and_result(nb: NotebookSession) -> None:
    r = nb.exec("import sys\nprint('out')\nprint('err', file=sys.stderr)\n6 * 7")
    assert r.ok and r.error is None
    assert (r.stdout, r.stderr, r.result) == ("out\n", "err\n", "42")
    assert isinstance(r.execution_count, int)
    assert [o["output_type"] for o in r.outputs] == ["stream", "stream", "execute_result"]
    assert "out" in str(r) and "42" in str(r)


def test_error_has_a_clean_traceback(nb: NotebookSession) -> None:
    r = nb.exec("def f():\n    raise ValueError('bad value')\nf()")
    assert not r.ok and r.error is not None
    assert (r.error.ename, r.error.evalue) == ("ValueError", "bad value")
    assert "\x1b[" not in r.error.traceback
    assert "raise ValueError('bad value')" in r.error.traceback
    assert any("\x1b[" in line for line in r.error.raw_traceback)
    assert r.outputs[-1]["output_type"] == "error"
    with pytest.raises(CellExecutionError, match="ValueError"):
        r.raise_for_error()
    assert strip_ansi("\x1b[31mred\x1b[0m") == "red"


def test_the_session_speaks_the_v1_kernel_protocol(nb: NotebookSession) -> None:
    """Where the server offers it, the kernel websocket carries the kernel's frames as they are
    (the server decodes and re-encodes no message)."""
    assert nb._channels is not None and nb._channels.v1


def test_a_server_without_the_v1_protocol_gets_legacy_json(
    plain: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that offers no subprotocol (one seer did not start, an older jupyter_server) gets
    the legacy JSON protocol, and every kind of output comes back the same."""
    from seer.notebook.client import KernelChannels

    monkeypatch.setattr(KernelChannels, "protocols", ())
    with create_notebook_session(plain, name="legacy", outputs_dir=False) as session:
        assert session._channels is not None and not session._channels.v1
        r = session.exec("import sys\nprint('out')\nprint('err', file=sys.stderr)\n6 * 7")
        assert (r.stdout, r.stderr, r.result) == ("out\n", "err\n", "42")
        bad = session.exec("raise ValueError('bad value')")
        assert bad.error is not None and (bad.error.ename, bad.error.evalue) == ("ValueError", "bad value")
        shown = session.exec("from IPython.display import HTML, display\ndisplay(HTML('<b>b</b>'))")
        assert shown.data("text/html") == ["<b>b</b>"]


def test_png_and_html_displays(nb: NotebookSession) -> None:
    png = _png()
    code = (
        "import base64\n"
        "from IPython.display import HTML, Image, display\n"
        f"display(Image(data=base64.b64decode({base64.b64encode(png).decode()!r})))\n"
        "display(HTML('<b>bold</b>'))\n"
    )
    r = nb.exec(code)
    assert r.ok, r.error
    assert r.images == [png]
    assert r.data("text/html") == ["<b>bold</b>"]
    assert [o["output_type"] for o in r.outputs] == ["display_data", "display_data"]
    recorded = _notebook_file(nb)["cells"][-1]
    assert base64.b64decode(recorded["outputs"][0]["data"]["image/png"]) == png


def test_display_updates_reach_the_notebook(nb: NotebookSession) -> None:
    nb.exec("from IPython.display import display\nh = display('first', display_id=True)")
    nb.exec("h.update('second')")
    cells = _notebook_file(nb)["cells"]
    shown = cells[-2]["outputs"][0]["data"]["text/plain"]
    assert "".join(shown) == "'second'"


def test_hidden_cells_leave_no_trace(nb: NotebookSession) -> None:
    before = len(nb.cells)
    r = nb.exec("secret_value = 'swordfish'\nprint('hidden ran')", hidden=True)
    assert r.ok and r.hidden and r.execution_count is None and r.stdout == "hidden ran\n"
    assert len(nb.cells) == before
    check = nb.exec("print(secret_value); print(any(('sword' + 'fish') in c for c in In + _ih))")
    assert check.stdout == "swordfish\nFalse\n"
    nb.flush()
    text = nb.sandbox.read_file(nb.notebook_path)  # type: ignore[union-attr]
    assert "secret_value = " not in text and "hidden ran" not in text


def test_notebook_file_holds_every_visible_cell_in_order(nb: NotebookSession, outputs: Path) -> None:
    codes = ["a = 1", "b = a + 1\nb", "print('third')"]
    for code in codes:
        nb.exec(code)
    nb.add_markdown("## A note")
    notebook = _notebook_file(nb)
    assert notebook["nbformat"] == 4 and notebook["nbformat_minor"] == 5
    assert _sources(notebook)[-4:] == [*codes, "## A note"]
    last_code = notebook["cells"][-2]
    assert last_code["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "third\n"}]
    counts = [c["execution_count"] for c in notebook["cells"] if c["cell_type"] == "code"]
    assert counts == sorted(counts)
    # Jupyter serves it as a notebook, and the local mirror is the same file.
    client = JupyterClient.from_url(nb.jupyter_url)
    status, model = client.request("GET", f"/api/contents/{nb.notebook_path}?type=notebook")
    assert status == 200 and model["type"] == "notebook"
    assert _sources(model["content"]) == _sources(notebook)
    mirror = outputs / "main.ipynb"
    assert nb.local_path == mirror.absolute()
    assert json.loads(mirror.read_text()) == notebook
    assert nb.notebook == notebook


def test_a_cell_is_in_the_notebook_before_it_runs(nb: NotebookSession, outputs: Path) -> None:
    """As in Jupyter: a client that dies mid-cell leaves the cell, and what it printed so far."""
    code = "import time\nprint('started', flush=True)\ntime.sleep(4)\nprint('finished')"
    runner = threading.Thread(target=nb.exec, args=(code,))
    runner.start()
    try:
        mirror = outputs / "main.ipynb"
        deadline = time.monotonic() + 30
        while True:  # the notebook in the sandbox and its copy on this machine, while it runs
            files = [nb.sandbox.read_file(nb.notebook_path), mirror.read_text()]  # type: ignore[union-attr]
            try:
                cells = [json.loads(f)["cells"][-1] for f in files]
            except ValueError:  # caught mid-write
                cells = []
            if cells and all("started" in json.dumps(c.get("outputs")) for c in cells):
                break
            assert time.monotonic() < deadline, cells
            time.sleep(0.2)
        assert runner.is_alive(), "seen while the cell runs"
        for cell in cells:
            assert "".join(cell["source"]) == code and "seer_running" in cell["metadata"]
            assert "finished" not in json.dumps(cell["outputs"])
    finally:
        runner.join()
    cell = _notebook_file(nb)["cells"][-1]
    assert "".join(cell["source"]) == code and cell["execution_count"]
    assert cell["outputs"][0]["text"] == "started\nfinished\n" and "seer_running" not in cell["metadata"]


def test_attach_recovers_what_the_kernel_ran_that_the_notebook_misses(plain: Sandbox) -> None:
    session = create_notebook_session(plain, name="lossy", outputs_dir=False)
    session.exec("x = 41")
    session.exec("x + 1")
    session.exec("print('lost')\nx * 2")
    url, sid = session.jupyter_url, session.session_id
    session.detach()
    # A client that died: its last cell never reached the notebook, the one before it only as a
    # cell that had started. (Written to the file: the server's live document takes it from there.)
    notebook = json.loads(plain.read_file("notebooks/lossy.ipynb"))
    started = notebook["cells"][1]
    started.update(execution_count=None, outputs=[], metadata={"seer_running": "gone"})
    del notebook["cells"][2]
    plain.write_file("notebooks/lossy.ipynb", json.dumps(notebook))
    live = LiveNotebook(JupyterClient.from_url(url), "notebooks/lossy.ipynb")
    try:
        deadline = time.monotonic() + 30
        while len(live.pull()[0]) != 2 and time.monotonic() < deadline:
            live.wait_changed(live.version, 1.0)
        assert len(live.pull()[0]) == 2
    finally:
        live.close()

    again = NotebookSession.attach(url, sid)
    try:
        assert [r.code for r in again.recovered] == ["x + 1", "print('lost')\nx * 2"]
        again.flush()
        saved = json.loads(plain.read_file("notebooks/lossy.ipynb"))["cells"]
        assert ["".join(c["source"]) for c in saved] == ["x = 41", "x + 1", "print('lost')\nx * 2"]
        assert [c["execution_count"] for c in saved] == [1, 2, 3]
        assert ["".join(c["outputs"][-1]["data"]["text/plain"]) for c in saved[1:]] == ["42", "82"]
        assert not any("seer_running" in c["metadata"] for c in saved)
        # Attaching again finds nothing more to recover.
        assert again.sync() == []
    finally:
        again.shutdown()


def test_exec_file(nb: NotebookSession, tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text("from_file = 'yes'\nprint(from_file)\n")
    r = nb.exec_file(script)
    assert r.stdout == "yes\n"
    assert _sources(_notebook_file(nb))[-1] == script.read_text()


def test_interrupt_stops_a_runaway_cell(nb: NotebookSession) -> None:
    results: list[Any] = []
    runner = threading.Thread(target=lambda: results.append(nb.exec("n = 0\nwhile True:\n    n += 1")))
    runner.start()
    client = nb.client
    deadline = time.monotonic() + 20
    while client.kernel(nb.kernel_id)["execution_state"] != "busy" and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    nb.interrupt()
    runner.join(timeout=30)
    assert not runner.is_alive()
    (r,) = results
    assert r.error is not None and r.error.ename == "KeyboardInterrupt"
    assert nb.exec("n > 0").result == "True"


def test_timeout_interrupts_and_raises(nb: NotebookSession) -> None:
    started = time.monotonic()
    with pytest.raises(CellTimeoutError) as info:
        nb.exec("import time\nprint('sleeping')\ntime.sleep(60)", timeout=1)
    assert time.monotonic() - started < 15
    assert info.value.result.stdout == "sleeping\n"
    assert info.value.result.error.ename == "KeyboardInterrupt"
    assert nb.exec("1 + 1").result == "2"


def test_a_dropped_connection_is_resumed(nb: NotebookSession) -> None:
    def drop() -> None:
        time.sleep(0.4)
        nb._channels._ws.abort()  # type: ignore[union-attr]

    dropper = threading.Thread(target=drop)
    dropper.start()
    r = nb.exec("import time\nprint('before', flush=True)\ntime.sleep(1)\nprint('after')\n'done'")
    dropper.join()
    # The server buffered what the cell sent while the client was away, and replayed it.
    assert (r.stdout, r.result) == ("before\nafter\n", "'done'")
    assert nb.exec("1 + 1").result == "2"


#: jupyter_server's kernel-websocket ping interval (seconds). Its ping check once closed every
#: kernel websocket this long after it opened, before a single ping was sent.
PING_INTERVAL = 30.0


def _signal_kernel(sandbox: Sandbox, kernel_id: str, sig: str) -> None:
    # "[x]" in the pattern keeps pkill from matching the command line that runs it.
    sandbox.exec(["pkill", f"-{sig}", "-f", f"kernel-[{kernel_id[0]}]{kernel_id[1:]}"], check=True)


def test_a_kernel_silent_past_the_ping_interval_is_still_connected_to(plain: Sandbox, outputs: Path) -> None:
    # A kernel that answers nothing for longer than the server's ping interval (one still importing
    # torch for its models on a loaded machine; here a stopped one) is connected to when it
    # answers, and an idle session's websocket stays open meanwhile: the server used to close
    # both one interval after they opened ("the kernel websocket closed").
    session = create_notebook_session(plain, name="silent", outputs_dir=outputs)
    first = session._channels
    attached: dict[str, Any] = {}

    def attach() -> None:
        try:
            attached["session"] = NotebookSession.attach(session.jupyter_url, session.session_id)
        except Exception as exc:
            attached["error"] = exc

    thread = threading.Thread(target=attach)
    try:
        _signal_kernel(plain, session.kernel_id, "STOP")
        try:
            thread.start()
            thread.join(timeout=PING_INTERVAL + 5)
        finally:
            _signal_kernel(plain, session.kernel_id, "CONT")
        thread.join(timeout=120)
        assert not thread.is_alive()
        assert "error" not in attached, attached.get("error")
        assert attached["session"].exec("6 * 7").result == "42"
        assert session._channels is first and first is not None and not first.closed
        assert session.exec("1 + 1").result == "2"
    finally:
        if "session" in attached:
            attached["session"].detach()
        session.shutdown()


def test_one_cell_at_a_time(nb: NotebookSession) -> None:
    results: list[Any] = []
    code = "import time\nstart = time.time()\ntime.sleep(0.3)\nprint(round(start, 3))"
    threads = [threading.Thread(target=lambda: results.append(nb.exec(code))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    starts = sorted(float(r.stdout) for r in results)
    assert len(starts) == 2 and starts[1] - starts[0] >= 0.29


# --- sessions: names, flags, attach ---------------------------------------------------------


def test_second_session_flags_names_and_attach(plain: Sandbox, nb: NotebookSession, outputs: Path) -> None:
    from seer.workspace import Workspace

    visible = create_notebook_session(
        plain, Workspace(hidden_model_loading=False), name="main", outputs_dir=outputs
    )
    try:
        assert visible.name == "main-2" and visible.notebook_path == "notebooks/main-2.ipynb"
        assert visible.kernel_id != nb.kernel_id
        assert visible.model_info_text == NO_MODELS_TEXT
        # hidden_model_loading=False: the loading cell is in the notebook.
        assert "__seer_load_models" in _sources(_notebook_file(visible))[0]
        visible.exec("x = 'from the first handle'")
        again = NotebookSession.attach(visible.jupyter_url, visible.session_id, sandbox=plain)
        try:
            assert again.kernel_id == visible.kernel_id
            assert again.exec("x").result == "'from the first handle'"
            assert _sources(_notebook_file(again))[-2:] == ["x = 'from the first handle'", "x"]
        finally:
            again._channels.close()  # type: ignore[union-attr]
    finally:
        visible.shutdown()
    assert visible.kernel_id not in {k["id"] for k in visible.client.call("GET", "/api/kernels")}

    bare = create_notebook_session(plain, Workspace(preload_models=False), outputs_dir=False)
    try:
        assert bare.local_path is None and bare.name.startswith("session-")
        assert _notebook_file(bare)["cells"] == []
    finally:
        bare.shutdown()
    with pytest.raises(NotebookError, match="shut down"):
        bare.exec("1")


def test_session_from_an_attached_sandbox_with_a_later_workspace(plain: Sandbox) -> None:
    from seer.workspace import Library, Workspace

    # Another process finds the sandbox (and its Jupyter server) from its record.
    again = Sandbox.attach(plain.sandbox_id)
    assert again.jupyter_url == plain.jupyter_url
    with create_notebook_session(again, outputs_dir=False) as session:
        session.setup(Workspace(libraries=[Library.from_code("VALUE = 'late'\n", "later_lib")]))
        assert session.exec("import later_lib\nlater_lib.VALUE").result == "'late'"
        assert _sources(_notebook_file(session)) == ["import later_lib\nlater_lib.VALUE"]


# --- models and workspaces ------------------------------------------------------------------


def test_models_are_preloaded(mnb: NotebookSession, with_models: Sandbox) -> None:
    # The session took the kernel started ahead of time.
    assert mnb.kernel_id == with_models._services["jupyter"]["warm_kernel"]
    assert "**model**" in mnb.model_info_text and "**tokenizer**" in mnb.model_info_text
    assert "LlamaForCausalLM" in mnb.model_info_text
    r = mnb.exec(
        "import torch\n"
        "ids = tokenizer('Hello world', return_tensors='pt')\n"
        "out = model.generate(**ids, max_new_tokens=4, do_sample=False)\n"
        "print(out.shape[1] - ids['input_ids'].shape[1])\n"
        "with torch.no_grad():\n"
        "    hs = model(**ids, output_hidden_states=True).hidden_states\n"
        "print(len(hs), tuple(hs[-1].shape))\n"
    )
    assert r.ok, r.error
    lines = r.stdout.splitlines()
    assert lines[0] == "4"
    layers = mnb.exec("model.config.num_hidden_layers").result
    assert lines[1].startswith(f"{int(layers) + 1} (1, ")


def _kernel_argv(session: NotebookSession) -> tuple[int, list[str]]:
    """The session's kernel process: its parent's pid and its command line."""
    value = session.exec(
        "import os\nos.getppid(), open(f'/proc/{os.getpid()}/cmdline').read().split('\\0')"
    ).result
    assert value is not None
    import ast

    ppid, argv = ast.literal_eval(value)
    return int(ppid), list(argv)


def test_the_first_kernel_was_started_with_the_server(mnb: NotebookSession, with_models: Sandbox) -> None:
    """The sandbox's first kernel is the process the server launcher started before the server
    itself (its imports overlap the server's start-up), adopted by the server: its child, reached
    through the usual kernel-<id>.json (a plain jupyter_client connects with it)."""
    from jupyter_client import BlockingKernelClient

    service = with_models._services["jupyter"]
    runtime = Path(service["runtime_dir"])
    ppid, argv = _kernel_argv(mnb)
    started_with = [a for a in argv if "kernel-seer-prestarted-" in a]
    assert started_with and started_with[0].startswith(str(runtime)), argv
    assert started_with[0].endswith(f"kernel-seer-prestarted-{ppid}.json")  # the server's own pid
    kc = BlockingKernelClient(connection_file=str(runtime / f"kernel-{mnb.kernel_id}.json"))
    kc.load_connection_file()
    assert kc.shell_port == json.loads(Path(started_with[0]).read_text())["shell_port"]
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
    finally:
        kc.stop_channels()


def test_forward_hook_on_a_layer_fires(mnb: NotebookSession) -> None:
    r = mnb.exec(
        "seen = []\n"
        "handle = model.model.layers[0].register_forward_hook(lambda m, i, o: seen.append(o))\n"
        "with torch.no_grad():\n"
        "    model(**tokenizer('hook me', return_tensors='pt'))\n"
        "handle.remove()\n"
        "print(len(seen), type(seen[0]).__name__, seen[0].shape[-1] == model.config.hidden_size)\n"
    )
    assert r.ok, r.error
    assert r.stdout == "1 Tensor True\n"


def test_model_loading_is_not_in_history_or_notebook(mnb: NotebookSession, manifest: dict[str, Any]) -> None:
    model_dir = manifest["models"][0]["path"]
    r = mnb.exec(
        "print(any(('load_' + 'model') in c or ('SEER_MODELS_' + 'MANIFEST') in c for c in In + _ih))"
    )
    assert r.stdout == "False\n"
    mnb.flush()
    text = mnb.sandbox.read_file(mnb.notebook_path)  # type: ignore[union-attr]
    assert model_dir not in text and "load_model" not in text and "__seer" not in text


def test_kernel_sees_the_variables_set_after_the_server_started(
    mnb: NotebookSession, manifest: dict[str, Any]
) -> None:
    # The server starts before the models step sets these; the kernel still gets them.
    entry = manifest["models"][0]
    r = mnb.exec(
        f"import os\nprint(os.environ[{entry['env_var']!r}])\nprint(os.environ['SEER_MODELS_MANIFEST'])"
    )
    assert r.stdout.splitlines() == [entry["path"], mnb.sandbox._env["SEER_MODELS_MANIFEST"]]  # type: ignore[union-attr]


def test_from_pretrained_of_a_loaded_model_warns(mnb: NotebookSession) -> None:
    """A second copy of a loaded model is harmless on a CPU and runs a GPU out of memory."""
    r = mnb.exec(
        "from transformers import AutoModelForCausalLM\n"
        "from seer.runtime.models import get_model_path\n"
        "second = AutoModelForCausalLM.from_pretrained(get_model_path('model'))\n"
        "type(second).__name__"
    )
    assert r.ok, r.error
    assert r.result == "'LlamaForCausalLM'"
    assert "already loaded in the kernel as `model`" in r.stderr and "Use `model` instead" in r.stderr
    quiet = mnb.exec("import transformers\ntransformers.LlamaConfig().model_type")
    assert quiet.stderr == ""


def test_workspace_libraries_are_importable(mnb: NotebookSession) -> None:
    r = mnb.exec("import helpers\nprint(helpers.answer(), init_ran)")
    assert r.stdout == "42 1\n"
    assert mnb.installed and mnb.installed[0].library_names == ["helpers"]


def test_kernel_death_then_restart_sets_everything_up_again(mnb: NotebookSession) -> None:
    mnb.exec("doomed = True")
    started = time.monotonic()
    with pytest.raises(KernelDiedError) as info:
        mnb.exec("import os\nprint('going', flush=True)\nos._exit(1)", timeout=60)
    assert time.monotonic() - started < 30
    assert "restart()" in str(info.value)
    assert not mnb.alive
    with pytest.raises(KernelDiedError):
        mnb.exec("1")
    # The cell that killed the kernel is in the notebook, saying so.
    assert _notebook_file(mnb)["cells"][-1]["outputs"][-1]["ename"] == "KernelDied"

    mnb.restart()
    assert mnb.alive
    # A restarted kernel is launched by the server as usual, on its own connection file; the one
    # the first kernel was started with is gone.
    _ppid, argv = _kernel_argv(mnb)
    assert not any("kernel-seer-prestarted-" in a for a in argv), argv
    assert mnb.sandbox is not None
    runtime = Path(mnb.sandbox._services["jupyter"]["runtime_dir"])
    assert not list(runtime.glob("kernel-seer-prestarted-*.json"))
    r = mnb.exec(
        "import helpers\nprint('doomed' in globals(), helpers.answer(), init_ran, type(model).__name__)"
    )
    assert r.ok, r.error
    doomed, answer, init_ran, model_type = r.stdout.split()
    assert (doomed, answer, init_ran, model_type) == ("False", "42", "1", "LlamaForCausalLM")
    assert "**model**" in mnb.model_info_text


def test_the_local_mirror_is_private_to_the_user(nb: NotebookSession, outputs: Path) -> None:
    """The client's copy of the notebook is 0600, as seer's records are."""
    nb.exec("print('private')")
    mirror = outputs / "main.ipynb"
    assert "private" in mirror.read_text()
    assert mirror.stat().st_mode & 0o777 == 0o600

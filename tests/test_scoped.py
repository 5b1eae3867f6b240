"""``ScopedSandbox`` on the local provider: serving interface files over RPC.

One sandbox for the module, configured with the tiny test model and started with a workspace.
Seed 002's example interface is served once (the only interface here that loads the model); the
other interfaces are small and import nothing heavy. Every sandbox started here is terminated.
"""

from __future__ import annotations

import json
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _model_kit import MODEL_ID, hf_home, tiny_dirs
from seer import SandboxConfig, ScopedSandbox, Workspace
from seer import environment as seer_environment
from seer.errors import (
    ConfigError,
    InterfaceError,
    InterfaceLoadError,
    RemoteError,
    RpcAuthError,
    SandboxNotRunningError,
    UnknownFunctionError,
    UnknownPluginError,
)
from seer.rpc import RpcClient, ServedInterface
from seer.workspace import Library

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: Seed 002's example interface, with the tiny model (found through the injected helper and
#: through its MODEL_..._PATH variable) in place of gemma.
SEED_INTERFACE = '''\
"""Seed 002's example interface: activations of the configured model."""
import os

import torch
from transformers import AutoModel, AutoTokenizer

# Setup: load the model explicitly (get_model_path is injected)
model = AutoModel.from_pretrained(get_model_path("seer-testing/tiny-llama"))
# ... and the tokenizer through the variable SandboxConfig sets
tokenizer = AutoTokenizer.from_pretrained(os.environ["MODEL_SEER_TESTING_TINY_LLAMA_PATH"])

# State: module-level variables work
cache = {}


@expose  # <-- Only thing injected
def get_activations(prompt: str, layer: int) -> dict:
    """Extract activations at a specific layer."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)

    with torch.no_grad():
        outputs = model(**inputs, output_hidden_states=True)

    activations = outputs.hidden_states[layer].mean(dim=0)
    cache[prompt] = activations

    return {
        "activations": activations.tolist(),
        "shape": list(activations.shape),
        "layer": layer,
    }


@expose
def get_activations_tensor(prompt: str, layer: int) -> torch.Tensor:
    """The same activations, as a tensor."""
    return cache[prompt] if prompt in cache else torch.tensor([])


@expose
def list_cache() -> dict:
    """List cached items."""
    return {"cache": list(cache.keys())}


@expose
def show_models() -> list:
    """Show all configured models."""
    return list_configured_models()


@expose
def model_paths() -> dict:
    return {
        "helper": get_model_path("seer-testing/tiny-llama"),
        "env": os.environ["MODEL_SEER_TESTING_TINY_LLAMA_PATH"],
        "name_or_path": model.config._name_or_path,
    }


# Private helpers (not exposed)
def _internal_helper():
    pass
'''

SMALL_INTERFACE = '''\
"""A small interface."""
import helpers_lib

SECRET = "module-global"
calls = []


def _internal_helper():
    return "private"


@expose
def version() -> int:
    return 1


@expose
def remember(text: str) -> int:
    calls.append(text)
    return len(calls)


@expose
def triple(x: int) -> int:
    """From the workspace library."""
    return helpers_lib.triple(x)


@expose
def fail() -> None:
    raise KeyError("missing thing")
'''


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(scope="module")
def scoped(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[ScopedSandbox]:
    from seer.testing.tiny_model import install_in_hub_cache

    dirs = tiny_dirs(tmp_path_factory, worker_id)
    workspace = Workspace(libraries=[Library.from_code("def triple(x):\n    return 3 * x\n", "helpers_lib")])
    with hf_home(tmp_path_factory.mktemp("hf-scoped")) as cache:
        install_in_hub_cache(dirs.model, MODEL_ID, cache_dir=cache)
        sandbox = ScopedSandbox(SandboxConfig(models=[{"name": MODEL_ID}], timeout=900))
        sandbox.start(workspace=workspace, name="scoped-tests")
    try:
        yield sandbox
    finally:
        sandbox.terminate()


@pytest.fixture(scope="module")
def seed(scoped: ScopedSandbox, tmp_path_factory: pytest.TempPathFactory) -> ServedInterface:
    path = tmp_path_factory.mktemp("seed") / "interface.py"
    path.write_text(SEED_INTERFACE)
    served = scoped.serve(path, expose_as=None)
    assert isinstance(served, ServedInterface)
    return served


@pytest.fixture(scope="module")
def small(scoped: ScopedSandbox, tmp_path_factory: pytest.TempPathFactory) -> ServedInterface:
    path = _write(tmp_path_factory.mktemp("small") / "small_tools.py", SMALL_INTERFACE)
    served = scoped.serve(path, expose_as=None, name="small")
    assert isinstance(served, ServedInterface)
    return served


# --- seed 002 ---------------------------------------------------------------------------------
def test_seed_interface_serves_activations(seed: ServedInterface, scoped: ScopedSandbox) -> None:
    assert seed.name == "interface" and seed.doc.startswith("Seed 002's example")
    assert [f.name for f in seed.functions] == [
        "get_activations",
        "get_activations_tensor",
        "list_cache",
        "show_models",
        "model_paths",
    ]
    spec = seed.function("get_activations")
    assert spec.signature == "(prompt: str, layer: int) -> dict"
    assert spec.doc == "Extract activations at a specific layer."
    assert spec.input_schema["required"] == ["prompt", "layer"]
    assert seed.remote_file == f"{scoped.interfaces_dir}/interface.py"

    client = seed.client(timeout=120)
    assert client.call("list_cache") == {"cache": []}
    out = client.call("get_activations", "The quick brown fox", layer=1)
    assert out["layer"] == 1 and len(out["shape"]) == 2 and out["shape"][1] == 64
    assert len(out["activations"]) == out["shape"][0] and len(out["activations"][0]) == 64
    # module state persists across calls (and clients)
    assert seed.client().call("list_cache") == {"cache": ["The quick brown fox"]}
    tensor = client.call("get_activations_tensor", "The quick brown fox", 1)
    import torch

    assert isinstance(tensor, torch.Tensor) and list(tensor.shape) == out["shape"]
    assert torch.allclose(tensor, torch.tensor(out["activations"]))


def test_seed_interface_finds_the_model_by_helper_and_env_var(
    seed: ServedInterface, scoped: ScopedSandbox
) -> None:
    client = seed.client()
    paths = client.call("model_paths")
    assert paths["helper"] == paths["env"] == scoped.model_handles[0].path
    (model,) = client.call("show_models")
    assert model["name"] == MODEL_ID and model["env_var"] == "MODEL_SEER_TESTING_TINY_LLAMA_PATH"


# --- serving ------------------------------------------------------------------------------------
def test_scoped_sandbox_runs_no_notebook(scoped: ScopedSandbox) -> None:
    assert scoped.config.execution_mode.value == "local"
    assert scoped.jupyter_url is None and "jupyter" not in scoped._services
    assert seer_environment.ScopedSandbox is ScopedSandbox
    with pytest.warns(UserWarning, match="execution_mode is taken as 'local'"):
        other = ScopedSandbox(SandboxConfig(execution_mode="notebook"))
    assert other.config.execution_mode.value == "local"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ScopedSandbox(SandboxConfig())  # the default mode is replaced silently


def test_workspace_libraries_import_and_errors_come_back(small: ServedInterface) -> None:
    client = small.client()
    assert client.call("triple", 5) == 15
    with pytest.raises(RemoteError) as info:
        client.call("fail")
    assert info.value.remote_type == "KeyError" and "missing thing" in info.value.message
    assert "small.py" in info.value.traceback


def test_only_exposed_functions_are_reachable(small: ServedInterface) -> None:
    client = small.client()
    for name in (
        "_internal_helper",
        "SECRET",
        "calls",
        "helpers_lib",
        "expose",
        "get_model_path",
        "list_configured_models",
        "__builtins__",
        "__dict__",
    ):
        with pytest.raises(UnknownFunctionError):
            client.call(name)
    assert {f.name for f in client.functions()} == {"version", "remember", "triple", "fail"}


def test_a_request_without_the_right_token_is_refused(small: ServedInterface) -> None:
    import http.client

    host, port = small.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", "/call/version", body=b"{}", headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 401 and b"unauthorized" in response.read()
    conn.close()
    with pytest.raises(RpcAuthError) as info:
        RpcClient(small.url, "not-the-token").call("version")
    assert info.value.status == 403
    with pytest.raises(RpcAuthError):
        RpcClient(small.url, small.token[:-1]).call("version")


def test_serving_again_after_an_edit_replaces_the_server(scoped: ScopedSandbox, tmp_path: Path) -> None:
    path = _write(tmp_path / "edited.py", "@expose\ndef version() -> int:\n    return 1\n")
    first = scoped.serve(path, expose_as=None)
    old_client = first.client()
    assert old_client.call("version") == 1
    path.write_text(
        "@expose\ndef version() -> int:\n    return 2\n\n@expose\ndef extra() -> str:\n    return 'new'\n"
    )
    with pytest.warns(UserWarning, match="'edited' is served again: the handles made from its earlier serve"):
        second = scoped.serve(path, expose_as=None)
    assert second.token != first.token and {f.name for f in second.functions} == {"version", "extra"}
    assert second.client().call("version") == 2
    # The old client (its kept-alive connection is gone) reaches the new server: refused, never stale.
    with pytest.raises(RpcAuthError, match=r"ended when it was served again"):
        old_client.call("version")
    assert scoped.served["edited"].token == second.token
    assert scoped.machine.process_running("rpc-edited")
    # An edit that breaks the file at load time: the old server is gone, and so is its record.
    path.write_text("@expose\ndef version() -> int:\n    return 3\n\nimport no_such_module_here\n")
    with (
        pytest.raises(InterfaceLoadError, match="No module named 'no_such_module_here'"),
        pytest.warns(UserWarning, match="served again"),
    ):
        scoped.serve(path, expose_as=None)
    assert "edited" not in scoped.served and not scoped.machine.process_running("rpc-edited")


def test_two_interfaces_are_served_side_by_side(
    scoped: ScopedSandbox, small: ServedInterface, tmp_path: Path
) -> None:
    other = scoped.serve(
        _write(tmp_path / "other.py", "@expose\ndef version() -> int:\n    return 99\n"), None
    )
    assert other.url != small.url
    assert other.client().call("version") == 99 and small.client().call("version") == 1
    assert {"small", "other"} <= set(scoped.served)


def test_uploaded_files_sit_beside_the_interface(scoped: ScopedSandbox, tmp_path: Path) -> None:
    helper = _write(tmp_path / "prompts_helper.py", "GREETING = 'hello from a helper'\n")
    data = _write(tmp_path / "facts.json", json.dumps({"answer": 42}))
    remote = scoped.upload_file(helper)
    scoped.upload_file(data)
    assert remote == f"{scoped.interfaces_dir}/prompts_helper.py"
    iface = _write(
        tmp_path / "uses_files.py",
        """
        import json
        from prompts_helper import GREETING

        @expose
        def greet() -> str:
            return GREETING

        @expose
        def answer() -> int:
            with open("facts.json") as fh:
                return json.load(fh)["answer"]
        """,
    )
    served = scoped.serve(iface, None)
    assert served.client().call("greet") == "hello from a helper"
    assert served.client().call("answer") == 42
    with pytest.raises(ConfigError, match="would replace the served interface"):
        scoped.upload_file(_write(tmp_path / "uses_files.py", "x = 1\n"))
    with pytest.raises(ConfigError, match="module uploaded beside"):
        scoped.serve(
            _write(tmp_path / "clash.py", "@expose\ndef f():\n    pass\n"), None, name="prompts_helper"
        )


def test_rpc_logs_have_a_line_per_call_and_no_values(
    scoped: ScopedSandbox, small: ServedInterface, capsys: pytest.CaptureFixture[str]
) -> None:
    small.client().call("remember", "top-secret-argument")
    scoped.show_rpc_logs(lines=50, name="small")
    out = capsys.readouterr().out
    assert "=== RPC server 'small'" in out and "call remember ok" in out
    assert "top-secret-argument" not in out and small.token not in out
    scoped.show_rpc_logs()
    assert "call remember ok" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="no interface 'nope'"):
        scoped.show_rpc_logs(name="nope")


def test_attach_knows_the_served_interfaces(scoped: ScopedSandbox, small: ServedInterface) -> None:
    again = ScopedSandbox.attach(scoped.sandbox_id)
    assert isinstance(again, ScopedSandbox)
    served = again.served["small"]
    assert served.url == small.url and served.token == small.token
    assert served.client().call("version") == 1


def test_the_expose_mode_gets_the_served_interface(
    scoped: ScopedSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seer import plugins
    from seer.expose import ExposeMode

    seen: list[Any] = []

    class Recording(ExposeMode):
        name = "recording"

        def expose(self, served: Any) -> Any:
            seen.append(served)
            return ("exposed", served.name)

    real = plugins.get_expose_mode
    monkeypatch.setattr(plugins, "get_expose_mode", lambda n: Recording if n == "recording" else real(n))
    path = _write(tmp_path / "modal_iface.py", "@expose\ndef f() -> int:\n    return 1\n")
    assert scoped.serve(path, expose_as="recording") == ("exposed", "modal_iface")
    assert isinstance(seen[0], ServedInterface) and seen[0].functions[0].name == "f"
    with pytest.raises(UnknownPluginError, match="no expose mode named 'nonexistent'"):
        scoped.serve(_write(tmp_path / "never.py", "@expose\ndef f():\n    pass\n"), expose_as="nonexistent")
    assert not scoped.machine.process_running("rpc-never")

    # Several modes at once: one server, one token, an exposure each; and one more later.
    both = scoped.serve(path, expose_as=["recording", "prompt"], name="modal_both")
    assert set(both) == {"recording", "prompt"} and both["recording"] == ("exposed", "modal_both")
    served = scoped.served["modal_both"]
    assert seen[-1].token == served.token and served.token in both["prompt"]
    assert served.expose("recording") == ("exposed", "modal_both") and seen[-1].url == served.url
    never = _write(tmp_path / "never.py", "@expose\ndef f():\n    pass\n")
    for expose_as, message in (
        ([], "expose_as: expected a mode name, a non-empty list of them, or None"),
        (["prompt", 3], "expose_as: expected a mode name"),
        (["prompt", "prompt"], "expose_as: 'prompt' given twice"),
    ):
        with pytest.raises(ConfigError, match=message):
            scoped.serve(never, expose_as=expose_as)
    with pytest.raises(UnknownPluginError, match="no expose mode named 'nonexistent'"):
        scoped.serve(never, expose_as=["prompt", "nonexistent"])
    assert "never" not in scoped.served and not scoped.machine.process_running("rpc-never")


# --- refusing bad files and arguments early -----------------------------------------------------
@pytest.mark.parametrize(
    ("source", "line", "message"),
    [
        ("@expose\ndef f(:\n    pass\n", 2, "syntax"),
        ("@expose\ndef f(*args):\n    pass\n", 2, r"\*args is not supported"),
        ("def helper():\n    pass\n", 1, "no function is exposed"),
    ],
)
def test_a_bad_file_fails_before_anything_is_uploaded(
    scoped: ScopedSandbox, tmp_path: Path, source: str, line: int, message: str
) -> None:
    path = _write(tmp_path / "broken.py", source)
    with pytest.raises(InterfaceError, match=message) as info:
        scoped.serve(path, expose_as=None)
    assert f"{path}:{line}:" in str(info.value)
    assert scoped.exec(["test", "-e", f"{scoped.interfaces_dir}/broken.py"]).exit_code != 0
    assert not scoped.machine.process_running("rpc-broken")
    # ... and before anything is provisioned: an unstarted sandbox raises the same, not "not started".
    with pytest.raises(InterfaceError, match=message):
        ScopedSandbox().serve(path)


def test_bad_serve_arguments_are_named(scoped: ScopedSandbox, tmp_path: Path) -> None:
    path = _write(tmp_path / "ok.py", "@expose\ndef f():\n    pass\n")
    with pytest.raises(InterfaceError, match="does not exist"):
        scoped.serve(tmp_path / "missing.py")
    with pytest.raises(ConfigError, match="name: 'bad-name' is not usable"):
        scoped.serve(path, None, name="bad-name")
    with pytest.raises(ConfigError, match="would shadow the module 'json'"):
        scoped.serve(path, None, name="json")
    with pytest.raises(ConfigError, match="start_timeout: must be a positive number"):
        scoped.serve(path, None, start_timeout=0)
    with pytest.raises(SandboxNotRunningError):
        ScopedSandbox().serve(path, None)
    with pytest.raises(ConfigError, match=r"workspace: expected a seer\.Workspace"):
        ScopedSandbox().start(workspace=["not", "a", "workspace"])  # type: ignore[arg-type]


def test_an_interface_that_raises_while_loading_is_reported(scoped: ScopedSandbox, tmp_path: Path) -> None:
    path = _write(
        tmp_path / "crashes.py", "@expose\ndef f():\n    pass\n\nraise RuntimeError('cannot load this')\n"
    )
    with pytest.raises(InterfaceLoadError, match="cannot load this") as info:
        scoped.serve(path, None)
    assert "crashes.py" in str(info.value) and "line 5" in str(info.value)
    assert "crashes" not in scoped.served
    leftovers = [f"{scoped.interfaces_dir}/crashes.py", scoped.machine.resolve(".seer/rpc/crashes.token")]
    for leftover in leftovers:  # a failed serve leaves nothing behind
        assert scoped.exec(["test", "-e", leftover]).exit_code != 0, leftover


def test_a_name_shadowing_an_installed_module_is_refused_and_later_serves_work(
    scoped: ScopedSandbox, tmp_path: Path
) -> None:
    shadow = _write(tmp_path / "numpy_clash.py", "@expose\ndef f():\n    pass\n")
    with pytest.raises(ConfigError, match=r"name: 'numpy' would shadow the module 'numpy' in the sandbox \("):
        scoped.serve(shadow, None, name="numpy")
    assert scoped.exec(["test", "-e", f"{scoped.interfaces_dir}/numpy.py"]).exit_code != 0
    assert "numpy" not in scoped.served and not scoped.machine.process_running("rpc-numpy")
    uses_numpy = _write(
        tmp_path / "uses_numpy.py",
        "import numpy\n\n\n@expose\ndef total(n: int) -> int:\n    return int(numpy.arange(n).sum())\n",
    )
    assert scoped.serve(uses_numpy, None).client().call("total", 5) == 10
    # A workspace library is an importable module too.
    with pytest.raises(ConfigError, match="would shadow the module 'helpers_lib'"):
        scoped.serve(shadow, None, name="helpers_lib")


def test_the_token_reaches_the_server_in_no_environment(
    scoped: ScopedSandbox, small: ServedInterface
) -> None:
    pid = small.client().health()["pid"]
    proc = Path(f"/proc/{pid}")
    if not proc.is_dir():
        pytest.skip("reads /proc")
    token = small.token.encode()
    assert token not in (proc / "environ").read_bytes() and token not in (proc / "cmdline").read_bytes()
    assert scoped.exec(["test", "-e", scoped.machine.resolve(".seer/rpc/small.token")]).exit_code != 0


def _agent_script(script: str, cwd: Path) -> Any:
    """Run ``script`` as the agent would, in a fresh interpreter without torch; its last line as JSON."""
    import subprocess
    import sys

    prelude = 'import sys\nsys.modules["torch"] = None\n'  # the agent's side needs no torch
    proc = subprocess.run(
        [sys.executable, "-c", prelude + script], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_seed_interface_through_each_of_the_four_expose_modes(seed: ServedInterface, tmp_path: Path) -> None:
    """Seed 002's interface with the tiny model, reached through library, prompt, skill and mcp
    exactly as ``serve(expose_as=...)`` hands them over, each used the way an agent uses it."""
    import importlib.util
    import re

    from seer import plugins

    prompt_text = "The quick brown fox"
    expected = seed.client().call("get_activations", prompt_text, layer=1)
    assert expected["layer"] == 1 and len(expected["activations"]) == expected["shape"][0]

    def mode(name: str) -> Any:
        return plugins.get_expose_mode(name)().expose(seed)

    # library: the generated module, imported and called.
    lib = mode("library")
    lib.install_into(tmp_path / "lib")
    got = _agent_script(
        f"import json, {lib.name}\nprint(json.dumps({lib.name}.get_activations({prompt_text!r}, layer=1)))\n",
        tmp_path / "lib",
    )
    assert got == expected

    # prompt: a script built only from what the prompt text says.
    text = mode("prompt")
    snippet = re.findall(r"```python\n(.*?)```", text, re.DOTALL)[0]
    client_var = re.search(r"Call: `(\w+)\.call\(", text)
    assert client_var is not None, text
    got = _agent_script(
        snippet + f"\nimport json\nprint(json.dumps({client_var.group(1)}.call("
        f"'get_activations', {prompt_text!r}, 1)))\n",
        tmp_path,
    )
    assert got == expected

    # skill: installed into a skills folder and used from there.
    folder = mode("skill").install_into(tmp_path / "skills")
    got = _agent_script(
        f"import json, sys\nsys.path.insert(0, {str(folder)!r})\nimport {seed.name}\n"
        f"print(json.dumps({seed.name}.get_activations({prompt_text!r}, 1)))\n",
        tmp_path,
    )
    assert got == expected

    # mcp: the tools listed and called by the mcp SDK's own client over stdio. The provider matrix
    # runs this with only core and one provider installed, where the mcp mode (seer[mcp]) is not.
    if importlib.util.find_spec("seer_mcp") is None:
        pytest.skip("library, prompt and skill passed; the mcp mode needs seer[mcp], not installed here")
    from _mcp_client import McpClient, server_env

    config = mode("mcp")
    with McpClient(config["args"], env=server_env(config["env"]), command=config["command"]) as client:
        names = {tool.name for tool in client.tools()}
        assert {"get_activations", "get_activations_tensor", "list_cache"} <= names
        result = client.call("get_activations", {"prompt": prompt_text, "layer": 1})
        assert not result.is_error, result
        assert result.structured_content is not None
        shown = json.dumps(result.structured_content)
        assert str(expected["shape"][0]) in shown and '"layer": 1' in shown

"""The built-in expose modes (``library``, ``prompt``, ``skill``): the generated client module has
the interface's exact signatures and docstrings, imports where the annotations' modules do not
exist, binds arguments as the original would; the prompt and the skill say how to call the
functions; all three are registered through the plugin hook and listed by ``seer plugins``.

End-to-end runs against a real ``ScopedSandbox`` are at the bottom."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import textwrap
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from seer import Library, Skill, plugins
from seer.errors import ConfigError
from seer.expose import ExposeMode
from seer.expose.modes import (
    LibraryMode,
    PromptMode,
    SkillMode,
    client_module_source,
    interface_docs,
    prompt_text,
)
from seer.rpc.spec import FunctionSpec, ParamSpec, inspect_interface

pytestmark = pytest.mark.unit

INTERFACE = '''\
"""Tools for the tests."""

from __future__ import annotations

DEFAULT_LAYER = 7


@expose
def get_activations(
    prompt: str,
    layer: int = 10,
    /,
    scale: float = 1.5,
    *,
    device: torch.device | None = None,
    tag: str = "x",
    dims: tuple[int, ...] = (1, -2, 3.0),
    table: dict[str, list[int]] = {"a": [1, 2]},
    layers: int = DEFAULT_LAYER,
    mode: "nonexistent_pkg.Mode" = 'fast',
) -> torch.Tensor:
    """Extract activations at a specific layer.

    Returns the bound arguments.
    """
    return dict(prompt=prompt, layer=layer, scale=scale, device=device, tag=tag, dims=dims,
                table=table, layers=layers, mode=mode)


@expose
def gap(a, b=DEFAULT_LAYER, c=3, /, d: list | None = None) -> dict:
    return dict(a=a, b=b, c=c, d=d)


@expose
def quoting() -> str:
    \'\'\'Docstring with """triple quotes""", a backslash \\\\n, unicode: λ → ✓ and a trailing "\'\'\'
    return "ok"


@expose
def list_cache() -> dict:
    """List cached items."""
    return {"cache": []}
'''


@dataclass
class FakeServed:
    """Shaped like ``seer.rpc.ServedInterface``."""

    name: str
    file: str
    url: str
    token: str
    functions: list[Any] = field(default_factory=list)


def served(source: str = INTERFACE, name: str = "tools", extra: list[Any] | None = None) -> FakeServed:
    functions = inspect_interface(source, "interface.py").functions + list(extra or [])
    return FakeServed(name, "/somewhere/interface.py", "http://127.0.0.1:9", "secret-token", functions)


def originals(source: str = INTERFACE) -> dict[str, Any]:
    namespace: dict[str, Any] = {"expose": lambda f: f}
    exec(compile(source, "interface.py", "exec"), namespace)
    return namespace


def load(source: str, name: str = "tools") -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, f"{name}.py", "exec"), module.__dict__)
    return module


class Recorder:
    """Has ``RpcClient.call``'s and ``invoke``'s signatures; remembers what it was asked."""

    def __init__(self, answer: Any = None):
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.answer = answer

    def call(self, function: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((function, args, kwargs))
        return self.answer

    def invoke(self, function: str, args: Any = (), kwargs: Any = None, *, timeout: Any = None) -> Any:
        return self.call(function, *args, **(kwargs or {}))


def _shape(fn: Any) -> list[tuple[str, Any, Any, Any]]:
    return [(p.name, p.kind, p.default, p.annotation) for p in inspect.signature(fn).parameters.values()]


# --- the library mode ------------------------------------------------------------------------
def test_library_functions_have_the_original_signatures_and_docstrings():
    lib = LibraryMode().expose(served())
    assert isinstance(lib, Library) and lib.name == "tools" and list(lib.files) == ["tools.py"]
    module = load(lib.files["tools.py"])
    orig = originals()
    assert module.__all__ == ["get_activations", "gap", "quoting", "list_cache"]
    for name in module.__all__:
        generated, original = getattr(module, name), orig[name]
        assert inspect.getdoc(generated) == inspect.getdoc(original), name
        assert inspect.signature(generated).return_annotation == inspect.signature(original).return_annotation
        gen_params = _shape(generated)
        orig_params = _shape(original)
        assert [p[:2] for p in gen_params] == [p[:2] for p in orig_params], name
        assert [p[3] for p in gen_params] == [p[3] for p in orig_params], name  # annotations as text
        for (pname, _, gen_default, _), (_, _, orig_default, _) in zip(gen_params, orig_params, strict=True):
            if pname in ("layers", "b"):  # DEFAULT_LAYER: not a literal, the sandbox's default
                assert repr(gen_default) == "DEFAULT_LAYER"
            else:
                assert gen_default == orig_default and type(gen_default) is type(orig_default), pname
    sig = inspect.signature(module.get_activations)
    assert str(sig).startswith("(prompt: 'str', layer: 'int' = 10, /, scale: 'float' = 1.5, *, device:")
    assert "layers: 'int' = DEFAULT_LAYER" in str(sig)
    assert sig.parameters["dims"].default == (1, -2, 3.0)
    assert sig.parameters["table"].default == {"a": [1, 2]}
    assert sig.parameters["device"].default is None
    assert module.quoting.__doc__.startswith(
        'Docstring with """triple quotes""", a backslash \\n, unicode: λ'
    )
    assert module.quoting.__doc__.endswith('trailing "')


@pytest.mark.parametrize(
    ("function", "args", "kwargs"),
    [
        ("get_activations", ("hi",), {}),
        ("get_activations", ("hi", 3), {}),
        ("get_activations", ("hi", 3, 2.0), {"device": "cpu", "layers": 2}),
        ("get_activations", ("hi",), {"scale": 0.5, "mode": "slow", "dims": (4,), "tag": "y"}),
        ("gap", (1,), {}),
        ("gap", (1, 2), {}),
        ("gap", (1, 2, 5), {"d": [1]}),
        ("gap", (1,), {"d": [2]}),
        ("list_cache", (), {}),
    ],
)
def test_calls_reach_the_sandbox_as_the_original_would_bind_them(function, args, kwargs):
    """Whatever the generated function sends, given to the original, binds the arguments the
    original would have bound for the same call (sandbox defaults left to the sandbox)."""
    module = load(client_module_source(served()))
    recorder = Recorder()
    module._seer_client = recorder
    getattr(module, function)(*args, **kwargs)
    [(name, sent_args, sent_kwargs)] = recorder.calls
    assert name == function
    assert all(not isinstance(v, module._SeerRemoteDefault) for v in [*sent_args, *sent_kwargs.values()])
    original = originals()[function]
    assert original(*sent_args, **sent_kwargs) == original(*args, **kwargs)


def test_a_positional_only_argument_after_one_left_to_the_sandbox_is_refused():
    module = load(client_module_source(served()))
    module._seer_client = Recorder()
    with pytest.raises(TypeError, match=r"gap\(\): to pass 'c', pass 'b' too"):
        module.gap(1, module._SeerRemoteDefault("DEFAULT_LAYER"), 5)


def test_var_positional_and_var_keyword_parameters():
    """seer's own server refuses ``*args``/``**kwargs``, but another server's spec may have them."""
    params = [
        ParamSpec("a", "positional_or_keyword"),
        ParamSpec("b", "positional_or_keyword", "int", "SOMETHING"),
        ParamSpec("rest", "var_positional", "int"),
        ParamSpec("flag", "keyword_only", "bool", "False"),
        ParamSpec("options", "var_keyword", "str"),
    ]
    spec = FunctionSpec("spread", params, None, "Spread.", "(...)")
    module = load(client_module_source(served(extra=[spec])))
    recorder = Recorder()
    module._seer_client = recorder
    assert str(inspect.signature(module.spread)) == (
        "(a, b: 'int' = SOMETHING, *rest: 'int', flag: 'bool' = False, **options: 'str')"
    )
    module.spread(1)
    module.spread(1, 2, 3, 4, x="y")
    with pytest.raises(TypeError, match="pass 'b' too"):
        module.spread(1, module._SeerRemoteDefault("SOMETHING"), 3)
    assert recorder.calls == [
        ("spread", (), {"flag": False, "a": 1}),
        ("spread", (1, 2, 3, 4), {"flag": False, "x": "y"}),
    ]


@pytest.mark.e2e
def test_the_client_imports_without_the_annotations_modules(tmp_path):
    """``torch`` is made unimportable in the child and ``nonexistent_pkg`` does not exist: the
    module still imports, shows its signatures, and does not import them."""
    LibraryMode().expose(served()).install_into(tmp_path)
    script = textwrap.dedent(
        f"""
        import inspect, sys
        sys.modules["torch"] = None  # importing torch now raises ImportError
        sys.path.insert(0, {str(tmp_path)!r})
        import tools
        print(inspect.signature(tools.get_activations))
        print(inspect.getdoc(tools.get_activations).splitlines()[0])
        assert sys.modules["torch"] is None and "nonexistent_pkg" not in sys.modules
        assert "seer.rpc" not in sys.modules  # the client is made on the first call
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "device: 'torch.device | None' = None" in out
    assert "mode: \"'nonexistent_pkg.Mode'\" = 'fast') -> 'torch.Tensor'" in out
    assert "Extract activations at a specific layer." in out


@pytest.mark.e2e
def test_docstrings_with_control_characters_survive(tmp_path):
    doc = "carriage\rreturn, NUL \x00, tab\tand form feed \x0c"
    spec = FunctionSpec("odd", [], None, doc, "()")
    LibraryMode().expose(served(extra=[spec])).install_into(tmp_path)
    script = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import tools; print(repr(tools.odd.__doc__))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == repr(doc)


def test_library_docs_list_signatures_and_docstrings():
    lib = LibraryMode().expose(served())
    assert lib.docs == interface_docs(served())
    assert "seer.rpc.RemoteError" in lib.docs and "`interface.py`" in lib.docs
    assert "/somewhere" not in lib.docs  # the file's name only
    assert 'def list_cache() -> dict:\n    """List cached items."""' in lib.docs
    assert "def gap(a, b=DEFAULT_LAYER, c=3, /, d: list | None = None) -> dict:\n    ..." in lib.docs
    assert "layers: int = DEFAULT_LAYER" in lib.docs and "applied in the sandbox" in lib.docs
    assert "secret-token" not in lib.docs


def test_bad_specs_are_refused_naming_file_and_line():
    bad = [
        FunctionSpec("_seer_call", [], None, "", "()", line=3),
        FunctionSpec("fine", [ParamSpec("_seer_x", "positional_or_keyword")], None, "", "()", line=7),
        FunctionSpec("class", [], None, "", "()", line=9),
        FunctionSpec(
            "order", [ParamSpec("a", "keyword_only"), ParamSpec("b", "positional_only")], None, "", ""
        ),
        FunctionSpec("fine2", [ParamSpec("x", "sideways")], None, "", "()", line=11),
    ]
    with pytest.raises(ConfigError) as err:
        LibraryMode().expose(served(extra=bad))
    text = str(err.value)
    assert "Cannot expose interface 'tools'" in text
    assert "/somewhere/interface.py:3: functions[_seer_call]" in text
    assert "/somewhere/interface.py:7: functions[fine]: parameter '_seer_x'" in text
    assert "'class' is not a valid function name" in text
    assert "not in a valid order" in text and "unknown kind 'sideways'" in text
    with pytest.raises(ConfigError, match="name"):
        LibraryMode().expose(FakeServed("not valid", "i.py", "http://x", "t", []))


def test_spec_text_cannot_inject_code():
    """Annotations and defaults are source text from the served spec: the generated module
    re-emits only single expressions (annotations never evaluated) and literals."""
    evil = "int) -> None:\n    import os; os.system('touch PWNED')\ndef g(x: int"
    params = [
        ParamSpec("x", "positional_or_keyword", evil, "__import__('os').system('touch PWNED2')"),
        ParamSpec("y", "positional_or_keyword", "__import__('os').getcwd()", "1"),
        ParamSpec("z", "keyword_only", "str", "make('x = 1')"),
    ]
    spec = FunctionSpec("f", params, "os.system('x')", 'doc """ with quotes', "()")
    source = client_module_source(served(extra=[spec]))
    module = load(source)
    sig = inspect.signature(module.f)
    assert repr(sig.parameters["x"].default) == "__import__('os').system('touch PWNED2')"
    assert sig.parameters["y"].annotation == "__import__('os').getcwd()"  # text, never run
    assert repr(sig.parameters["z"].default) == "make('x = 1')" and sig.parameters["z"].annotation == "str"
    assert sig.parameters["x"].annotation == repr(evil)  # not one expression: kept as a string
    assert sig.return_annotation == "os.system('x')"
    assert not hasattr(module, "g")
    assert not Path("PWNED").exists() and not Path("PWNED2").exists()


# --- the prompt mode -------------------------------------------------------------------------
def test_prompt_says_what_the_tools_are_and_how_to_call_them():
    text = PromptMode().expose(served())
    assert text == prompt_text(served())
    assert text.startswith("# Tools: `tools`")
    for name in ("get_activations", "gap", "quoting", "list_cache"):
        assert f"### `{name}`" in text
    assert "Extract activations at a specific layer." in text
    assert "get_activations(prompt: str, layer: int = 10, /, scale: float = 1.5, *, device:" in text
    assert 'tools = RpcClient("http://127.0.0.1:9", "secret-token")' in text
    assert 'result = tools.call("quoting")' in text  # the snippet calls a no-argument function
    assert 'Call: `tools.call("get_activations", "text")`' in text
    assert 'Call: `tools.call("gap", None)`' in text
    assert "seer.rpc.RemoteError" in text and "http://127.0.0.1:9" in text
    assert "Leave out `layers` to use the sandbox's default." in text
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    compile(blocks[0], "snippet.py", "exec")


# --- the skill mode --------------------------------------------------------------------------
def test_skill_has_front_matter_usage_and_the_client(tmp_path):
    skill = SkillMode().expose(served())
    assert isinstance(skill, Skill) and skill.name == "tools"
    assert "get_activations" in skill.description and len(skill.description) <= 1024
    assert skill.files["tools.py"] == client_module_source(served())
    folder = skill.install_into(tmp_path)
    again = Skill.from_dir(folder)
    assert again == skill
    assert "sys.path.insert(0" in again.body and 'print(tools.get_activations("text"))' in again.body
    assert "def list_cache() -> dict:" in again.body
    # The description stays within the limit with many functions.
    many = [FunctionSpec(f"function_number_{i}", [], None, "", "()") for i in range(100)]
    big = SkillMode().expose(served(extra=many))
    assert "(104 of them)" in big.description


# --- registration ----------------------------------------------------------------------------
def test_builtin_expose_modes_register_through_the_hook(fresh_plugins):
    modes = plugins.expose_modes()
    for name, cls in (("library", LibraryMode), ("prompt", PromptMode), ("skill", SkillMode)):
        assert modes[name].cls is cls and modes[name].plugin == "builtin-modes"
        assert modes[name].distribution == "seer-core"
        assert issubclass(plugins.get_expose_mode(name), ExposeMode) and cls.description
    entry = next(p for p in plugins.loaded_plugins() if p.name == "builtin-modes")
    assert "seer_register_expose_modes" in entry.hooks


@pytest.mark.e2e
def test_seer_plugins_lists_the_builtin_expose_modes():
    from seer import cli
    from typer.testing import CliRunner

    runner = CliRunner()
    result = runner.invoke(cli.create_app(), ["plugins", "--json"], prog_name="seer")
    assert result.exit_code == 0, result.output
    modes = {m["name"]: m for m in json.loads(result.stdout)["expose_modes"]}
    for name, cls in (("library", LibraryMode), ("prompt", PromptMode), ("skill", SkillMode)):
        assert modes[name]["description"] == cls.description
        assert modes[name]["distribution"] == "seer-core"
    table = runner.invoke(cli.create_app(), ["plugins"], prog_name="seer")
    assert table.exit_code == 0, table.output
    section = " ".join(table.stdout.split("Expose modes", 1)[1].split())  # rows wrap at 80 columns
    for cls in (LibraryMode, PromptMode, SkillMode):
        assert f"{cls.name} seer-core {cls.description}" in section, section


# --- end to end, against a real ScopedSandbox ------------------------------------------------
#: Seed 002's example interface, without the model (the tiny-model version is in
#: tests/test_local_session.py).
SEED_INTERFACE = '''\
"""interface.py - completely self-contained"""

from __future__ import annotations

# State: Module-level variables work
cache = {}


@expose
def get_activations(prompt: str, layer: int, *, scale: float = 1.0) -> dict:
    """Extract activations at a specific layer."""
    activations = [scale * (ord(c) % (layer + 2)) for c in prompt]
    cache[prompt] = layer
    return {"activations": activations, "shape": [len(activations)], "layer": layer}


@expose
def list_cache() -> dict:
    """List cached items."""
    return {"cache": list(cache.keys())}


@expose
def fail(message: str = "boom", tensor: torch.Tensor | None = None) -> None:
    """Raise ValueError(message)."""
    raise ValueError(message)


# Private helpers (not exposed)
def _internal_helper():
    pass
'''


@pytest.fixture(scope="module")
def scoped(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from seer import SandboxConfig
    from seer.sandbox.scoped import ScopedSandbox

    interface = tmp_path_factory.mktemp("iface") / "interface.py"
    interface.write_text(SEED_INTERFACE)
    sandbox = ScopedSandbox(SandboxConfig(timeout=600))
    sandbox.start(name="expose-modes")
    try:
        yield sandbox, interface
    finally:
        sandbox.terminate()


def _run(script: str, cwd: Path) -> Any:
    """Run ``script`` in a fresh interpreter (torch made unimportable); its last line as JSON."""
    prelude = 'import sys\nsys.modules["torch"] = None\n'
    proc = subprocess.run(
        [sys.executable, "-c", prelude + script], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.e2e
def test_library_calls_the_sandbox_and_errors_come_back_as_remote_error(scoped, tmp_path):
    sandbox, interface = scoped
    lib = sandbox.serve(interface, expose_as="library", name="tools")
    assert isinstance(lib, Library) and lib.name == "tools"
    assert "Extract activations at a specific layer." in lib.docs
    lib.install_into(tmp_path)
    out = _run(
        textwrap.dedent(
            """
            import inspect, json
            import tools
            from seer.rpc import RemoteError
            first = tools.get_activations("hello", layer=2)
            second = tools.get_activations("hi", 3, scale=2.0)
            try:
                tools.fail("it broke")
            except RemoteError as exc:
                error = [exc.remote_type, exc.message, "ValueError" in exc.traceback]
            print(json.dumps({
                "first": first, "second": second, "cache": tools.list_cache(), "error": error,
                "signature": str(inspect.signature(tools.fail)),
            }))
            """
        ),
        tmp_path,
    )
    assert out["first"] == {"activations": [0.0, 1.0, 0.0, 0.0, 3.0], "shape": [5], "layer": 2}
    assert out["second"]["activations"] == [8.0, 0.0]
    assert out["cache"] == {"cache": ["hello", "hi"]}
    assert out["error"] == ["ValueError", "it broke", True]
    assert out["signature"] == "(message: 'str' = 'boom', tensor: 'torch.Tensor | None' = None) -> 'None'"
    # In this process too, the signatures are the served ones.
    module = load(lib.files["tools.py"])
    served_specs = {f.name: f for f in sandbox.served["tools"].functions}
    for name, spec in served_specs.items():
        assert str(inspect.signature(getattr(module, name))).replace("'", "") == spec.signature.replace(
            "'", ""
        )


@pytest.mark.e2e
def test_a_script_written_from_the_prompt_alone_works(scoped, tmp_path):
    sandbox, interface = scoped
    text = sandbox.serve(interface, expose_as="prompt", name="prompt_tools")
    assert isinstance(text, str) and "`get_activations`" in text
    snippet = re.findall(r"```python\n(.*?)```", text, re.DOTALL)[0]
    call = re.search(r"Call: `(prompt_tools\.call\(\"get_activations\".*?)`", text)
    assert call is not None, text
    script = snippet + f"\nimport json\nprint(json.dumps({{'snippet': result, 'call': {call.group(1)}}}))\n"
    (tmp_path / "agent.py").write_text(script)
    proc = subprocess.run(
        [sys.executable, "agent.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["snippet"] == {"cache": []}  # the snippet calls list_cache()
    assert out["call"] == {"activations": [0.0, 1.0, 0.0, 0.0], "shape": [4], "layer": 0}  # "text", 0


@pytest.mark.e2e
def test_an_installed_skill_is_used_by_another_process(scoped, tmp_path):
    sandbox, interface = scoped
    skill = sandbox.serve(interface, expose_as="skill", name="skill_tools")
    assert isinstance(skill, Skill)
    skills_dir = tmp_path / "skills"
    folder = skill.install_into(skills_dir)
    assert sorted(p.name for p in folder.iterdir()) == ["SKILL.md", "skill_tools.py"]
    # What SKILL.md says to do: put its folder on sys.path, import the module.
    body = (folder / "SKILL.md").read_text()
    example = re.findall(r"```python\n(.*?)```", body, re.DOTALL)[0]
    example = example.replace("<this skill's folder>", str(folder))
    assert 'print(skill_tools.get_activations(prompt="text", layer=0))' in example
    out = _run(
        example.replace("print(", "import json; print(json.dumps(", 1).replace("))", ")))", 1), tmp_path
    )
    assert out == {"activations": [0.0, 1.0, 0.0, 0.0], "shape": [4], "layer": 0}

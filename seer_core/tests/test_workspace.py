"""Libraries, skills and workspaces: each constructor, every validation error, the docs the agent
is shown, and installing into a real local sandbox and into a local directory."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import seer
from seer import ExecutionMode, Sandbox, SandboxConfig
from seer.errors import ConfigError
from seer.workspace import InstalledWorkspace, Library, Skill, Workspace

pytestmark = pytest.mark.unit

HELPERS = '''\
"""Helpers for steering experiments."""

raise RuntimeError("imported! seer must only parse library files")


def steer(model, vector, layer: int = 20, *, scale: float = 1.0) -> dict:
    """Add ``vector`` to the residual stream at ``layer``."""


async def fetch(url):
    pass


class Hook:
    """A forward hook."""

    def __init__(self, layer: int):
        self.layer = layer

    def remove(self) -> None:
        """Detach the hook."""

    def _internal(self):
        pass


def _private_helper():
    pass
'''


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def make_package(root: Path) -> Path:
    pkg = root / "mypkg"
    write(pkg / "__init__.py", '"""My package."""\nfrom .core import double\n')
    write(pkg / "core.py", 'def double(x: int) -> int:\n    """Twice x."""\n    return 2 * x\n')
    write(pkg / "_impl.py", "def hidden():\n    pass\n")
    write(pkg / "sub" / "__init__.py", '"""A subpackage."""\ndef triple(x):\n    return 3 * x\n')
    write(pkg / "data" / "table.json", '{"answer": 42}')
    (pkg / "data" / "blob.bin").write_bytes(b"\x80\x00\xff")
    write(pkg / "__pycache__" / "core.cpython-311.pyc", "junk")
    write(pkg / ".hidden" / "x.py", "junk(")
    return pkg


def make_skill(
    root: Path, name: str = "steering-hook", code: str | None = "def add(a, b):\n    return a + b\n"
) -> Path:
    folder = root / name
    write(
        folder / "SKILL.md",
        f"""\
        ---
        name: {name}
        description: Add steering vectors to a model's residual stream.
        license: MIT
        ---

        # Steering hook

        Call `add(a, b)`.
        """,
    )
    if code is not None:
        write(folder / "code.py", code)
    write(folder / "reference" / "notes.md", "Notes.\n")
    return folder


# --- Library: constructors -------------------------------------------------------------------
def test_from_file_reads_source_and_documents_the_public_api_without_importing(tmp_path: Path) -> None:
    lib = Library.from_file(write(tmp_path / "helpers.py", HELPERS))
    assert lib.name == "helpers"
    assert lib.is_single_file
    assert list(lib.files) == ["helpers.py"]
    assert lib.files["helpers.py"] == HELPERS
    assert lib.docs.startswith("Helpers for steering experiments.")
    assert "def steer(model, vector, layer: int=20, *, scale: float=1.0) -> dict:" in lib.docs
    assert "Add ``vector`` to the residual stream at ``layer``." in lib.docs
    assert "async def fetch(url):" in lib.docs
    assert "class Hook:" in lib.docs and "def __init__(self, layer: int):" in lib.docs
    assert "def remove(self) -> None:" in lib.docs and "Detach the hook." in lib.docs
    assert "_private_helper" not in lib.docs and "_internal" not in lib.docs


def test_from_file_takes_a_custom_name_and_makes_file_names_importable(tmp_path: Path) -> None:
    src = write(tmp_path / "my-helpers.py", "def f():\n    pass\n")
    assert Library.from_file(src).name == "my_helpers"
    custom = Library.from_file(src, name="tools")
    assert custom.name == "tools" and list(custom.files) == ["tools.py"]


def test_from_file_follows___all__(tmp_path: Path) -> None:
    src = write(
        tmp_path / "api.py",
        '__all__ = ["shown"]\n\ndef shown():\n    pass\n\ndef not_exported():\n    pass\n',
    )
    docs = Library.from_file(src).docs
    assert "def shown():" in docs and "not_exported" not in docs


def test_from_directory_takes_modules_and_package_data(tmp_path: Path) -> None:
    lib = Library.from_directory(make_package(tmp_path))
    assert lib.name == "mypkg"
    assert not lib.is_single_file
    assert sorted(lib.files) == [
        "mypkg/__init__.py",
        "mypkg/_impl.py",
        "mypkg/core.py",
        "mypkg/data/blob.bin",
        "mypkg/data/table.json",
        "mypkg/sub/__init__.py",
    ]
    assert lib.files["mypkg/data/blob.bin"] == b"\x80\x00\xff"  # not UTF-8: kept as bytes
    assert lib.files["mypkg/data/table.json"] == '{"answer": 42}'
    assert lib.docs.startswith("My package.")
    assert "**`mypkg.core`**" in lib.docs and "def double(x: int) -> int:" in lib.docs
    assert "**`mypkg.sub`**" in lib.docs and "def triple(x):" in lib.docs
    assert "hidden" not in lib.docs  # private module


def test_from_directory_custom_name(tmp_path: Path) -> None:
    lib = Library.from_directory(make_package(tmp_path), name="renamed")
    assert "renamed/__init__.py" in lib.files and not any(k.startswith("mypkg") for k in lib.files)


def test_from_directory_needs_an_init_file(tmp_path: Path) -> None:
    write(tmp_path / "loose" / "a.py", "x = 1\n")
    with pytest.raises(ConfigError, match=r"has no __init__.py, so it is not a package") as info:
        Library.from_directory(tmp_path / "loose")
    assert info.value.fields == ["path"] and "loose" in str(info.value)


def test_from_file_and_directory_reject_missing_or_wrong_kind_paths(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'.*nope.py' does not exist"):
        Library.from_file(tmp_path / "nope.py")
    with pytest.raises(ConfigError, match=r"is a directory \(use Library.from_directory\)"):
        Library.from_file(tmp_path)
    with pytest.raises(ConfigError, match=r"is not a Python \(.py\) file"):
        Library.from_file(write(tmp_path / "notes.txt", "hi"))
    with pytest.raises(ConfigError, match=r"is a file \(use Library.from_file\)"):
        Library.from_directory(write(tmp_path / "m.py", ""))


def test_from_skill_dir_names_the_library_after_the_skill(tmp_path: Path) -> None:
    lib = Library.from_skill_dir(make_skill(tmp_path))
    assert lib.name == "steering_hook"
    assert lib.files == {"steering_hook.py": "def add(a, b):\n    return a + b\n"}
    assert lib.docs.startswith("# Steering hook") and "Call `add(a, b)`." in lib.docs
    assert "license" not in lib.docs  # the body, not the front matter


def test_from_skill_dir_needs_code_py(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"has no code.py to import"):
        Library.from_skill_dir(make_skill(tmp_path, code=None))


def test_from_code(tmp_path: Path) -> None:
    lib = Library.from_code('"""Tools."""\ndef my_helper(x):\n    return x * 2\n', name="helpers")
    assert lib.name == "helpers" and lib.is_single_file
    assert lib.docs.startswith("Tools.") and "def my_helper(x):" in lib.docs


def test_direct_construction_and_its_layouts() -> None:
    single = Library(name="tools", files={"tools.py": "def helper(): pass"}, docs="Helper utilities")
    assert single.is_single_file and single.docs == "Helper utilities"
    # A single module under another file name is installed under the import name.
    assert Library(name="tools", files={"helper.py": "x = 1"}).files == {"tools.py": "x = 1"}
    # Package paths may be given relative to the package.
    pkg = Library(name="pkg", files={"__init__.py": "", "./sub/m.py": "y = 2"})
    assert sorted(pkg.files) == ["pkg/__init__.py", "pkg/sub/m.py"] and not pkg.is_single_file
    assert Library(name="pkg", files={"pkg/__init__.py": ""}).files == {"pkg/__init__.py": ""}
    assert single == Library(name="tools", files={"tools.py": "def helper(): pass"}, docs="Helper utilities")


# --- Library: validation ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("json", "would shadow the standard-library module 'json'"),
        ("class", "is a Python keyword"),
        ("my-lib", "is not a valid Python identifier"),
        ("2fast", "is not a valid Python identifier"),
        ("seer", "would shadow seer itself"),
        ("", "must be a non-empty string"),
    ],
)
def test_library_name_is_checked(name: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        Library(name=name, files={"x.py": ""})
    assert info.value.fields == ["name"]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/etc/x.py", "is absolute"),
        ("../x.py", "contains '..'"),
        ("a/../../x.py", "contains '..'"),
        ("sub\\x.py", "use '/'"),
        ("", "must be a non-empty string"),
    ],
)
def test_library_file_paths_are_checked(path: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        Library(name="pkg", files={"__init__.py": "", path: "x = 1"})
    assert info.value.fields[0].startswith("files")


def test_library_must_be_a_module_or_a_package() -> None:
    with pytest.raises(
        ConfigError, match=r"one module .* or a package with __init__.py; got \['a.py', 'b.py'\]"
    ):
        Library(name="x", files={"a.py": "", "b.py": ""})
    with pytest.raises(ConfigError, match="at least one file"):
        Library(name="x", files={})
    with pytest.raises(ConfigError, match="content must be str or bytes"):
        Library(name="x", files={"x.py": 3})  # type: ignore[dict-item]


def test_syntax_error_in_a_file_names_the_file_and_line(tmp_path: Path) -> None:
    src = write(tmp_path / "broken.py", "x = 1\n\ndef f(:\n    pass\n")
    with pytest.raises(ConfigError) as info:
        Library.from_file(src)
    (problem,) = info.value.problems
    assert problem.file == str(src) and problem.line == 3
    assert f"{src}:3:" in str(info.value) and "syntax error" in str(info.value)


def test_syntax_error_in_a_package_module_names_that_module(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    write(pkg / "sub" / "bad.py", "def ok():\n    pass\nreturn = 5\n")
    with pytest.raises(ConfigError) as info:
        Library.from_directory(pkg)
    (problem,) = info.value.problems
    assert problem.file == str(pkg / "sub" / "bad.py") and problem.line == 3


def test_syntax_error_in_direct_or_code_construction() -> None:
    with pytest.raises(ConfigError, match=r"x.py:2: files\['x.py'\]: syntax error"):
        Library(name="x", files={"x.py": "a = 1\nb = (\n"})
    with pytest.raises(ConfigError, match=r"helpers.py:1: .*syntax error"):
        Library.from_code("def f(:\n", name="helpers")


# --- Skill -----------------------------------------------------------------------------------
def test_skill_from_dir_keeps_front_matter_body_and_files(tmp_path: Path) -> None:
    skill = Skill.from_dir(make_skill(tmp_path))
    assert skill.name == "steering-hook"
    assert skill.description == "Add steering vectors to a model's residual stream."
    assert skill.metadata == {"license": "MIT"}
    assert skill.body.startswith("# Steering hook")
    assert list(skill.files) == ["SKILL.md", "code.py", "reference/notes.md"]
    assert skill.files["SKILL.md"] == skill.skill_md
    assert skill.skill_md.startswith("---\nname: steering-hook\ndescription: Add steering vectors")
    # What it writes is what it read.
    copy = Skill.from_dir(skill.install_into(tmp_path / "installed"))
    assert copy == skill


def test_skill_built_in_code_writes_an_agent_skills_folder(tmp_path: Path) -> None:
    skill = Skill(
        "probe-tools",
        "Linear probes over activations.",
        body="Use `fit_probe`.",
        files={"code.py": "x = 1\n"},
    )
    folder = skill.install_into(tmp_path / "skills")
    assert folder == tmp_path / "skills" / "probe-tools"
    text = (folder / "SKILL.md").read_text()
    assert (
        text
        == "---\nname: probe-tools\ndescription: Linear probes over activations.\n---\n\nUse `fit_probe`.\n"
    )
    assert (folder / "code.py").read_text() == "x = 1\n"


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"name": "has space", "description": "d"}, "name", "letters, digits, '-' or '_'"),
        ({"name": "../up", "description": "d"}, "name", "letters, digits, '-' or '_'"),
        ({"name": "ok", "description": "  "}, "description", "non-empty"),
        ({"name": "ok", "description": "d" * 1025}, "description", "at most 1024"),
        (
            {"name": "ok", "description": "d", "files": {"SKILL.md": "x"}},
            "files",
            "pass its instructions as body=",
        ),
        ({"name": "ok", "description": "d", "files": {"/abs": "x"}}, "files['/abs']", "is absolute"),
        ({"name": "ok", "description": "d", "metadata": {"name": "x"}}, "metadata", "must not repeat name"),
    ],
)
def test_skill_fields_are_checked(kwargs: dict, field: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        Skill(**kwargs)
    assert info.value.fields == [field]


@pytest.mark.parametrize(
    ("skill_md", "line", "message"),
    [
        ("# No front matter\n", 1, "no front matter"),
        ("---\nname: x\ndescription: d\n", 1, "never closed"),
        ("---\nname: x\ndescription: [unclosed\n---\n", 4, "not valid YAML"),
        ("---\n- a list\n---\n", 2, "must be a mapping"),
        ("---\nname: x\n---\nBody.\n", 1, "description: is missing from the front matter"),
        ("---\ndescription: d\nname: has space\n---\n", 3, "name: must be 1-64 letters"),
    ],
)
def test_skill_md_errors_name_the_file_and_line(
    tmp_path: Path, skill_md: str, line: int, message: str
) -> None:
    write(tmp_path / "s" / "SKILL.md", skill_md)
    with pytest.raises(ConfigError, match=message) as info:
        Skill.from_dir(tmp_path / "s")
    (problem,) = info.value.problems
    assert problem.file == str(tmp_path / "s" / "SKILL.md") and problem.line == line


def test_skill_from_dir_needs_a_skill_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"has no SKILL\.md, so it is not a skill folder"):
        Skill.from_dir(tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        Skill.from_dir(tmp_path / "missing")


# --- Workspace: validation and docs ----------------------------------------------------------
def test_workspace_defaults() -> None:
    ws = Workspace()
    assert ws.libraries == [] and ws.all_skills == [] and ws.local_files == [] and ws.local_dirs == []
    assert ws.custom_init_code == "" and ws.preload_models is True and ws.hidden_model_loading is True
    assert ws.get_library_docs() == ""


def test_workspace_reports_every_problem_with_its_field(tmp_path: Path) -> None:
    a = Library.from_code("x = 1", name="a")
    write(tmp_path / "not-a-skill" / "README.md", "hi")
    bad_skill = write(tmp_path / "bad-skill" / "SKILL.md", "---\nname: bad-skill\n---\n").parent
    with pytest.raises(ConfigError) as info:
        Workspace(
            libraries=[a, Library.from_code("y = 2", name="a"), "helpers.py"],  # type: ignore[list-item]
            skills=[Skill("dup", "d"), Skill("dup", "e")],
            skill_dirs=[tmp_path / "not-a-skill", bad_skill, tmp_path / "gone"],
            local_files=[tmp_path / "missing.txt", (tmp_path, "x")],
            local_dirs=[(write(tmp_path / "f.txt", "hi"), "y")],
            custom_init_code="def (:",
            preload_models="yes",  # type: ignore[arg-type]
        )
    err = info.value
    assert str(err).startswith("Invalid workspace:")
    messages = {p.field: p.message for p in err.problems}
    assert err.fields == [
        "libraries[1]",
        "libraries[2]",
        "skills[1]",
        "skill_dirs[0]",
        "skill_dirs[1].description",
        "skill_dirs[2]",
        "local_files[0]",
        "local_files[1]",
        "local_dirs[0]",
        "custom_init_code",
        "preload_models",
    ]
    assert "a library named 'a' is already given at libraries[0]" in messages["libraries[1]"]
    assert (
        "expected a Library" in messages["libraries[2]"] and "Library.from_file" in messages["libraries[2]"]
    )
    assert "a skill named 'dup' is already given at skills[0]" in messages["skills[1]"]
    assert "has no SKILL.md" in messages["skill_dirs[0]"]
    assert "is missing" in messages["skill_dirs[1].description"]
    assert "does not exist" in messages["skill_dirs[2]"]
    assert "missing.txt' does not exist" in messages["local_files[0]"]
    assert "is a directory (use local_dirs)" in messages["local_files[1]"]
    assert "is a file (use local_files)" in messages["local_dirs[0]"]
    assert "syntax error at line 1" in messages["custom_init_code"]
    assert "must be True or False" in messages["preload_models"]


def test_workspace_rejects_a_bare_string_for_a_list_and_clashing_skill_dirs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"libraries: expected a list"):
        Workspace(libraries="helpers.py")  # type: ignore[arg-type]
    folder = make_skill(tmp_path)
    with pytest.raises(
        ConfigError, match=r"skill_dirs\[0\]: a skill named 'steering-hook' is already given at skills\[0\]"
    ):
        Workspace(skills=[Skill.from_dir(folder)], skill_dirs=[folder])


def test_custom_init_code_may_use_ipython_syntax() -> None:
    assert Workspace(custom_init_code="%load_ext autoreload\n%autoreload 2\n").custom_init_code.startswith(
        "%"
    )


def test_get_library_docs_combines_libraries_and_skills(tmp_path: Path) -> None:
    ws = Workspace(
        libraries=[
            Library.from_file(write(tmp_path / "helpers.py", HELPERS)),
            Library.from_directory(make_package(tmp_path)),
            Library.from_skill_dir(make_skill(tmp_path)),
        ],
        skills=[Skill("probe-tools", "Linear probes over activations.")],
        skill_dirs=[make_skill(tmp_path / "more", name="other-skill")],
    )
    docs = ws.get_library_docs()
    for name in ("helpers", "mypkg", "steering_hook"):
        assert f"## `{name}`\n\n```python\nimport {name}\n```" in docs
    assert docs.index("## `helpers`") < docs.index("## `mypkg`") < docs.index("## `steering_hook`")
    assert "def steer(model, vector" in docs and "def double(x: int) -> int:" in docs
    # A library's own headings nest under its section.
    assert "\n### Steering hook\n" in docs and "\n# Steering hook" not in docs
    assert "# Skills" in docs
    assert "- **probe-tools**: Linear probes over activations." in docs
    assert "- **other-skill**: Add steering vectors to a model's residual stream." in docs
    assert "`/x/skills/<name>/SKILL.md`" in ws.get_library_docs(skills_dir="/x/skills")


# --- installing ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    sb = Sandbox(SandboxConfig(timeout=300, execution_mode=ExecutionMode.CLI)).start()
    try:
        yield sb
    finally:
        sb.terminate()


def full_workspace(tmp_path: Path) -> Workspace:
    write(tmp_path / "data" / "inputs.csv", "a,b\n1,2\n")
    write(tmp_path / "configs" / "run.yaml", "lr: 0.1\n")
    write(tmp_path / "configs" / "nested" / "more.yaml", "seed: 1\n")
    return Workspace(
        libraries=[
            Library.from_file(write(tmp_path / "mylib.py", '"""Mine."""\ndef answer():\n    return 42\n')),
            Library.from_directory(make_package(tmp_path)),
            Library.from_skill_dir(make_skill(tmp_path / "skills")),
        ],
        skills=[Skill("probe-tools", "Linear probes.", body="Fit probes.", files={"probe.py": "P = 1\n"})],
        skill_dirs=[make_skill(tmp_path / "more", name="other-skill", code=None)],
        local_files=[
            (tmp_path / "data" / "inputs.csv", "inputs/data.csv"),
            str(tmp_path / "configs" / "run.yaml"),
        ],
        local_dirs=[(tmp_path / "configs", "cfg")],
        custom_init_code="WORKSPACE_READY = True",
    )


CHECK = """
import json, sys
import mylib, mypkg, steering_hook
from importlib import resources
print(json.dumps({
    "mylib": mylib.answer(),
    "mypkg": mypkg.double(21),
    "sub": __import__("mypkg.sub", fromlist=["triple"]).triple(2),
    "data": json.loads(resources.files("mypkg").joinpath("data/table.json").read_text()),
    "blob": list(resources.files("mypkg").joinpath("data/blob.bin").read_bytes()),
    "skill": steering_hook.add(2, 3),
    "ready": globals().get("WORKSPACE_READY"),
    "where": mylib.__file__,
}))
"""


@pytest.mark.e2e
def test_install_into_a_sandbox(sandbox: Sandbox, tmp_path: Path) -> None:
    installed = full_workspace(tmp_path).install(sandbox)
    assert isinstance(installed, InstalledWorkspace)
    root = f"{sandbox.workdir}/.seer/workspace"
    assert installed.root == root
    assert installed.libs_dir == f"{root}/libs" and installed.skills_dir == f"{root}/skills"
    assert installed.library_names == ["mylib", "mypkg", "steering_hook"]
    assert installed.skill_names == ["probe-tools", "other-skill"]
    assert installed.init_code == "WORKSPACE_READY = True"
    assert "## `mylib`" in installed.docs and f"`{root}/skills/<name>/SKILL.md`" in installed.docs
    listing = sandbox.exec(["ls", "-A", f"{installed.libs_dir}/mypkg"], check=True).stdout.split()
    assert listing == ["__init__.py", "_impl.py", "core.py", "data", "sub"]  # no __pycache__, no .hidden

    # The contract the notebook uses: libs_dir first on sys.path, then init_code.
    script = f"import sys; sys.path.insert(0, {installed.libs_dir!r})\n{installed.init_code}\n{CHECK}"
    out = json.loads(sandbox.exec_python(script, check=True).stdout)
    assert out == {
        "mylib": 42,
        "mypkg": 42,
        "sub": 6,
        "data": {"answer": 42},
        "blob": [0x80, 0x00, 0xFF],
        "skill": 5,
        "ready": True,
        "where": f"{installed.libs_dir}/mylib.py",
    }
    # setup_code does the same in one go.
    assert json.loads(sandbox.exec_python(installed.setup_code + CHECK, check=True).stdout)["ready"] is True

    skill_md = sandbox.read_file(f"{installed.skills_dir}/probe-tools/SKILL.md")
    assert skill_md.startswith("---\nname: probe-tools\ndescription: Linear probes.\n---")
    assert sandbox.read_file(f"{installed.skills_dir}/probe-tools/probe.py") == "P = 1\n"
    assert sandbox.read_file(f"{installed.skills_dir}/other-skill/SKILL.md").startswith(
        "---\nname: other-skill"
    )
    assert sandbox.read_file(f"{installed.skills_dir}/other-skill/reference/notes.md") == "Notes.\n"
    assert sandbox.read_file("inputs/data.csv") == "a,b\n1,2\n"
    assert sandbox.read_file("run.yaml") == "lr: 0.1\n"  # a bare path keeps its name
    assert sandbox.read_file("cfg/nested/more.yaml") == "seed: 1\n"


@pytest.mark.e2e
def test_install_takes_a_root_and_absolute_workspace_paths(sandbox: Sandbox, tmp_path: Path) -> None:
    target = f"{sandbox.workdir}/elsewhere/notes.txt"
    ws = Workspace(
        libraries=[Library.from_code("VALUE = 'custom root'", name="rootlib")],
        local_files=[(write(tmp_path / "notes.txt", "hello"), target)],
    )
    installed = ws.install(sandbox, root="custom/ws")
    assert installed.libs_dir == f"{sandbox.workdir}/custom/ws/libs"
    out = sandbox.exec_python(installed.setup_code + "import rootlib; print(rootlib.VALUE)", check=True)
    assert out.stdout.strip() == "custom root"
    assert sandbox.read_file(target) == "hello"
    assert sandbox.exec(["test", "-d", installed.skills_dir]).exit_code == 0  # there even with no skills


@pytest.mark.e2e
def test_install_local(tmp_path: Path) -> None:
    work = tmp_path / "work"
    installed = full_workspace(tmp_path / "src").install_local(work)
    root = work.resolve() / ".seer" / "workspace"
    assert installed.libs_dir == str(root / "libs") and installed.skills_dir == str(root / "skills")
    assert (root / "libs" / "mylib.py").is_file() and (
        root / "libs" / "mypkg" / "data" / "blob.bin"
    ).is_file()
    assert (root / "skills" / "probe-tools" / "SKILL.md").is_file()
    assert (root / "skills" / "other-skill" / "reference" / "notes.md").is_file()
    assert (work / "inputs" / "data.csv").read_text() == "a,b\n1,2\n"
    assert (work / "run.yaml").read_text() == "lr: 0.1\n"
    assert (work / "cfg" / "nested" / "more.yaml").read_text() == "seed: 1\n"
    proc = subprocess.run(
        [sys.executable, "-c", installed.setup_code + CHECK], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["mypkg"] == 42


def test_install_local_keeps_files_inside_the_directory(tmp_path: Path) -> None:
    src = write(tmp_path / "a.txt", "a")
    with pytest.raises(
        ConfigError, match=r"local_files\[0\]: .* is outside .*needs a relative workspace path"
    ):
        Workspace(local_files=[(src, "/etc/a.txt")]).install_local(tmp_path / "work")
    assert not (tmp_path / "work").exists()  # checked before anything is written


@pytest.mark.parametrize("remote", ["../a.txt", "data/../../a.txt", ".."])
def test_a_workspace_path_leading_out_of_the_working_directory_is_refused(
    tmp_path: Path, remote: str
) -> None:
    """Refused when the Workspace is made, before any sandbox: the copy would land outside the
    working directory (on the local provider, anywhere on the client's disk), as SandboxConfig's
    local_files refuses too."""
    src = write(tmp_path / "a.txt", "a")
    (tmp_path / "d").mkdir()
    for field_name, value in (("local_files", [(src, remote)]), ("local_dirs", [(tmp_path / "d", remote)])):
        with pytest.raises(
            ConfigError, match=rf"{field_name}\[0\]: .*{re.escape(repr(remote))} leads out of"
        ):
            Workspace(**{field_name: value})
    assert Workspace(local_files=[(src, "data/../a.txt")]).local_files[0][1] == "data/../a.txt"


def test_classes_are_exported_from_seer() -> None:
    assert (seer.Workspace, seer.Library, seer.Skill) == (Workspace, Library, Skill)

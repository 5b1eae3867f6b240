"""What the distribution hands the client: the modules as Library objects, and the methodology."""

from __future__ import annotations

import ast

import pytest
import seer_toolkit
from seer.workspace import Library, Workspace

pytestmark = pytest.mark.unit


def test_libraries_are_every_module_dependencies_first() -> None:
    libs = seer_toolkit.libraries()
    names = [lib.name for lib in libs]
    assert set(names) == set(seer_toolkit.MODULES)
    for lib in libs:
        assert isinstance(lib, Library) and lib.docs  # docs the agent is shown, from the docstrings
        for dep in seer_toolkit.MODULES[lib.name]:
            assert names.index(dep) < names.index(lib.name)


def test_declared_dependencies_are_the_imports() -> None:
    """MODULES says which toolkit modules each imports; a scoped workspace relies on it."""
    for name, deps in seer_toolkit.MODULES.items():
        tree = ast.parse(seer_toolkit.module_path(name).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert imported & set(seer_toolkit.MODULES) == set(deps), name


def test_a_subset_brings_what_it_imports() -> None:
    assert [lib.name for lib in seer_toolkit.libraries(["extract_activations"])] == [
        "model_layers",
        "activation_cache",
        "extract_activations",
    ]
    with pytest.raises(ValueError, match=r"no toolkit module 'steering'.*steering_hook"):
        seer_toolkit.libraries(["steering"])


def test_seed_example_2_layout() -> None:
    """Seed 004 Example 2 reads ``toolkit/<module>.py`` and ``toolkit/research_methodology.md``."""
    toolkit = seer_toolkit.MODULES_DIR
    workspace = Workspace(
        libraries=[
            Library.from_file(toolkit / "steering_hook.py"),
            Library.from_file(toolkit / "extract_activations.py"),
            Library.from_file(toolkit / "generate_response.py"),
        ]
    )
    assert "create_steering_hook" in workspace.get_library_docs()
    methodology = (toolkit / "research_methodology.md").read_text()
    assert methodology == seer_toolkit.research_methodology()
    assert "falsifiable" in methodology and seer_toolkit.METHODOLOGY_PATH.is_file()


@pytest.mark.e2e
def test_importing_the_package_imports_no_torch() -> None:
    import subprocess
    import sys

    code = "import sys, seer_toolkit; seer_toolkit.libraries(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

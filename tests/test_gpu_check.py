"""The parts of ``scripts/gpu-check`` that need no sandbox: its table, and how ``--prepare`` picks wheels.

The check itself runs in ``.ci/run`` (``scripts/gpu-check --cpu``); these keep its bookkeeping
honest: a step that raises or whose check fails is a FAILED row and a failing exit, a skipped step
says why, and nothing the GPU machine's image has is carried.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from gpu_check import wheels
from gpu_check.report import FAILED, PASSED, SKIPPED, Report, check

pytestmark = pytest.mark.unit


def test_a_check_that_does_not_hold_fails_its_row_and_the_next_step_runs() -> None:
    report = Report("t")
    with report.step("first") as row:
        row.seer_s, row.by_hand_s = 2.0, 1.0
        check(1 + 1 == 3, "arithmetic is off")
    with report.step("second") as row:
        raise RuntimeError("boom")
    with report.step("third") as row:
        row.seer_s = 0.05
    assert [r.status for r in report.rows] == [FAILED, FAILED, PASSED]
    assert report.rows[0].notes == ["arithmetic is off"] and report.rows[1].notes == ["RuntimeError: boom"]
    assert report.failed
    text = report.markdown()
    assert "| first | FAILED | 2.00 s | 1.00 s | 2.00x | arithmetic is off |" in text
    assert "| third | passed | 50.0 ms | - | - |  |" in text


def test_a_skipped_step_says_why_and_is_not_a_pass() -> None:
    report = Report("t")
    report.skip("toolkit", "the notebook step failed before it")
    assert report.rows[0].status == SKIPPED and not report.failed
    assert "| toolkit | skipped | - | - | - | the notebook step failed before it |" in report.markdown()


def test_pipes_in_notes_do_not_break_the_table() -> None:
    report = Report("t")
    with report.step("a|b") as row:
        row.notes.append("x | y\nz")
    assert "| a\\|b | passed | - | - | - | x \\| y z |" in report.markdown()


def test_compiled_pins_are_read_by_canonical_name() -> None:
    text = "Jinja2==3.1.6\n    # via x\npydantic_core==2.41.5 ; python_version >= '3.9'\n\n"
    assert wheels._pins(text) == {"jinja2": "Jinja2==3.1.6", "pydantic-core": "pydantic_core==2.41.5"}


def test_the_gpu_image_has_the_stack_and_not_what_seer_must_carry() -> None:
    image = wheels.image_packages()
    assert {wheels._canonical(n) for n in wheels.GPU_STACK} <= image
    # seer's own needs the image lacks: these must travel as wheels
    assert not {"pydantic", "jupyter-server", "ipykernel", "mcp", "seer-core"} & image


def test_first_results_compare_exactly_on_the_cpu_and_within_a_bound_on_a_gpu() -> None:
    from gpu_check.steps import same_result

    line = "cuda:0 torch.bfloat16 (1, 6, 512) -30.445"
    assert same_result(line, line + "\n", exact=True) == "the same"
    assert same_result(line, "cuda:0 torch.bfloat16 (1, 6, 512) -30.446", exact=True) == ""
    assert same_result(line, "cuda:0 torch.bfloat16 (1, 6, 512) -30.446", exact=False) == "within 1e-3 of the"
    assert same_result(line, "cuda:0 torch.bfloat16 (1, 6, 512) -31.0", exact=False) == ""
    assert same_result(line, "cpu torch.float32 (1, 6, 512) -30.445", exact=False) == ""
    assert same_result(line, "Traceback ...", exact=False) == ""


ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_cpu_form_and_fails_when_it_does() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python scripts/gpu-check --cpu || gpu_check_rc=$?" in ci
    assert "if [[ $gpu_check_rc -ne 0 ]]; then" in ci


def test_the_page_says_whether_the_check_has_run_on_a_gpu() -> None:
    """Until a real run's table (with its card) is on docs/gpu.md, the page says it has not run."""
    page = (ROOT / "docs" / "gpu.md").read_text()
    has_table = "| install seer from .gpu-wheels, offline | passed |" in page and "card NVIDIA" in page
    assert has_table or "has **not yet run on a GPU**" in page


def test_the_kernel_age_cell_prints_how_long_ago_its_process_began() -> None:
    """The seed 004 rows place the kernel's start against the session's with this cell."""
    import subprocess
    import sys

    from gpu_check.kernel import KERNEL_AGE

    out = subprocess.run(
        [sys.executable, "-c", "import time; time.sleep(0.3)\n" + KERNEL_AGE],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    age = float(out.strip())
    assert 0.25 <= age < 60, age


def test_phases_read_in_the_order_measured() -> None:
    from gpu_check.steps import _phases

    assert (
        _phases({"start": 1.2345, "session": 3.0, "cell": 0.01})
        == "start 1.23 s, session 3.00 s, cell 0.01 s"
    )

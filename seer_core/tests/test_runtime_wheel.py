"""The runtime wheel: built once per distinct source, found again without zipping the package."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from seer.providers import wheel

pytestmark = pytest.mark.unit


def test_unchanged_source_finds_its_wheel_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = wheel.runtime_wheel(tmp_path)
    assert hashlib.sha256(first.path.read_bytes()).hexdigest() == first.sha256
    assert "seer/runtime/__init__.py" in zipfile.ZipFile(first.path).namelist()

    def no_build(version: str) -> bytes:
        raise AssertionError("the wheel was zipped again for unchanged source")

    monkeypatch.setattr(wheel, "_build", no_build)
    again = wheel.runtime_wheel(tmp_path)
    assert (again.path, again.sha256) == (first.path, first.sha256)


def test_changed_source_or_a_damaged_wheel_builds_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = wheel.runtime_wheel(tmp_path)
    built: list[str] = []
    real = wheel._build

    def counting(version: str) -> bytes:
        built.append(version)
        return real(version)

    monkeypatch.setattr(wheel, "_build", counting)
    # a file of the package changed: its size or modification time changes the fingerprint
    monkeypatch.setattr(wheel, "_fingerprint", lambda version: "0" * 64)
    assert wheel.runtime_wheel(tmp_path).sha256 == first.sha256
    assert len(built) == 1
    # the wheel the index names was damaged: it is rebuilt, not used
    first.path.write_bytes(b"not a wheel")
    rebuilt = wheel.runtime_wheel(tmp_path)
    assert len(built) == 2
    assert hashlib.sha256(rebuilt.path.read_bytes()).hexdigest() == first.sha256


def test_the_fingerprint_follows_the_package_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "seer"
    package.mkdir()
    (package / "__init__.py").write_text("x = 1\n")
    import seer

    monkeypatch.setattr(seer, "__file__", str(package / "__init__.py"))
    before = wheel._fingerprint("0.0")
    (package / "__init__.py").write_text("x = 22\n")
    assert wheel._fingerprint("0.0") != before

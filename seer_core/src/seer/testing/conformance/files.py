"""Files: text and bytes round trips, awkward and relative paths, modes, large files, and
directories both ways."""

from __future__ import annotations

import hashlib
import os
import secrets
import shlex
from pathlib import Path

import pytest

from seer.sandbox import Sandbox
from seer.testing.conformance.base import ConformanceBase
from seer.testing.conformance.helpers import tree


class FileTests(ConformanceBase):
    """Files: text and bytes round trips, awkward and relative paths, modes, large files, and
    directories both ways."""

    def test_awkward_paths(self, sandbox: Sandbox, scratch: str, tmp_path: Path) -> None:
        awkward = f'{scratch}/with space/it\'s "ü" $x;'
        sandbox.write_file(f"{awkward}/file name.txt", "awkward")
        assert sandbox.read_file(f"{awkward}/file name.txt") == "awkward"
        assert sandbox.exec(["cat", "file name.txt"], cwd=awkward, timeout=60).stdout == "awkward"
        sandbox.ensure_dir(f"{awkward}/made dir")
        assert sandbox.exec(["test", "-d", f"{awkward}/made dir"], timeout=60).exit_code == 0
        src = tmp_path / "a dir"
        src.mkdir()
        (src / "in it.txt").write_text("inside")
        sandbox.upload_dir(src, f"{awkward}/up loaded")
        assert sandbox.read_file(f"{awkward}/up loaded/in it.txt") == "inside"
        sandbox.download_dir(f"{awkward}/up loaded", tmp_path / "back again")
        assert (tmp_path / "back again" / "in it.txt").read_text() == "inside"

    def test_text_round_trip(self, sandbox: Sandbox, scratch: str) -> None:
        text = "héllo wörld ✓\nsecond line\n"
        sandbox.write_file(f"{scratch}/hello.txt", text)
        assert sandbox.read_file(f"{scratch}/hello.txt") == text
        assert sandbox.exec(["cat", f"{scratch}/hello.txt"], timeout=60).stdout == text

    def test_overwrite_truncates(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.write_file(f"{scratch}/f.txt", "a much longer first version")
        sandbox.write_file(f"{scratch}/f.txt", "short")
        assert sandbox.read_file(f"{scratch}/f.txt") == "short"

    def test_binary_every_byte(self, sandbox: Sandbox, scratch: str) -> None:
        data = bytes(range(256)) * 64 + b"\r\n\x00\r"
        sandbox.write_file(f"{scratch}/all.bin", data)
        assert sandbox.read_bytes(f"{scratch}/all.bin") == data
        check = (
            f"import hashlib; print(hashlib.sha256(open({f'{scratch}/all.bin'!r}, 'rb').read()).hexdigest())"
        )
        assert sandbox.exec_python(check, timeout=60).stdout.strip() == hashlib.sha256(data).hexdigest()

    def test_large_file(self, sandbox: Sandbox, scratch: str) -> None:
        data = os.urandom(self.large_file_size)
        path = f"{scratch}/large.bin"
        sandbox.write_file(path, data)
        code = (
            f"import hashlib, os\np = {path!r}\n"
            "print(os.path.getsize(p), hashlib.sha256(open(p, 'rb').read()).hexdigest())"
        )
        assert sandbox.exec_python(code, timeout=300).stdout.split() == [
            str(len(data)),
            hashlib.sha256(data).hexdigest(),
        ]
        assert sandbox.read_bytes(path) == data

    def test_write_creates_parents(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.write_file(f"{scratch}/a/b/c/d.txt", "deep")
        assert sandbox.exec(["test", "-d", f"{scratch}/a/b/c"], timeout=60).exit_code == 0
        assert sandbox.read_file(f"{scratch}/a/b/c/d.txt") == "deep"

    def test_relative_paths_resolve_against_workdir(self, sandbox: Sandbox, scratch: str) -> None:
        workdir = sandbox.workdir
        assert workdir.startswith("/")
        sandbox.write_file(f"{scratch}/rel.txt", "relative")
        absolute = f"{workdir.rstrip('/')}/{scratch}/rel.txt"
        assert sandbox.machine.resolve(f"{scratch}/rel.txt") == absolute
        assert sandbox.read_file(absolute) == "relative"
        assert sandbox.exec(["cat", absolute], timeout=60).stdout == "relative"
        sandbox.write_file(f"{workdir.rstrip('/')}/{scratch}/abs.txt", "absolute")
        assert sandbox.read_file(f"{scratch}/abs.txt") == "absolute"

    def test_write_mode(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.machine.write_bytes(f"{scratch}/private.txt", b"p", mode=0o600)
        sandbox.machine.write_bytes(f"{scratch}/tool.sh", b"#!/bin/sh\necho tool-ran\n", mode=0o755)
        code = f"import os; print(oct(os.stat({f'{scratch}/private.txt'!r}).st_mode & 0o777))"
        assert sandbox.exec_python(code, timeout=60).stdout == "0o600\n"
        tool = sandbox.machine.resolve(f"{scratch}/tool.sh")
        assert sandbox.exec([tool], timeout=60).stdout == "tool-ran\n"

    def test_read_missing_file(self, sandbox: Sandbox, scratch: str) -> None:
        with pytest.raises(FileNotFoundError):
            sandbox.read_file(f"{scratch}/missing.txt")
        with pytest.raises(FileNotFoundError):
            sandbox.read_bytes(sandbox.machine.resolve(f"{scratch}/nowhere/missing.bin"))

    def test_upload_file(self, sandbox: Sandbox, scratch: str, tmp_path: Path) -> None:
        tool = tmp_path / f"tool-{secrets.token_hex(3)}.sh"
        tool.write_text("#!/bin/sh\necho uploaded-tool\n")
        tool.chmod(0o755)
        remote = sandbox.upload_file(tool, f"{scratch}/bin/tool.sh")
        assert remote == sandbox.machine.resolve(f"{scratch}/bin/tool.sh")
        assert sandbox.exec([remote], timeout=60).stdout == "uploaded-tool\n"
        default = sandbox.upload_file(tool)
        assert default == sandbox.machine.resolve(tool.name)
        assert sandbox.read_file(tool.name) == tool.read_text()
        sandbox.exec(["rm", "-f", default], timeout=60)
        with pytest.raises(FileNotFoundError):
            sandbox.upload_file(tmp_path / "absent.txt")

    def test_upload_and_download_dir(self, sandbox: Sandbox, scratch: str, tmp_path: Path) -> None:
        src = tmp_path / "src"
        (src / "a" / "b").mkdir(parents=True)
        (src / "empty").mkdir()
        (src / "top.txt").write_text("top\n")
        (src / "a" / "b" / "deep.bin").write_bytes(bytes(range(256)))
        (src / "a" / "run.sh").write_text("#!/bin/sh\necho dir-tool\n")
        (src / "a" / "run.sh").chmod(0o755)
        remote = sandbox.upload_dir(src, f"{scratch}/up")
        assert remote == sandbox.machine.resolve(f"{scratch}/up")
        listing = sandbox.exec(f"cd {shlex.quote(remote)} && find . | sort", timeout=60).stdout.split()
        assert listing == [".", "./a", "./a/b", "./a/b/deep.bin", "./a/run.sh", "./empty", "./top.txt"]
        assert sandbox.read_bytes(f"{scratch}/up/a/b/deep.bin") == bytes(range(256))
        assert sandbox.exec([f"{remote}/a/run.sh"], timeout=60).stdout == "dir-tool\n"
        out = sandbox.download_dir(f"{scratch}/up", tmp_path / "out")
        assert out == tmp_path / "out"
        assert tree(out) == tree(src)
        assert os.access(out / "a" / "run.sh", os.X_OK)

    def test_upload_dir_default_destination(self, sandbox: Sandbox, tmp_path: Path) -> None:
        src = tmp_path / f"updir-{secrets.token_hex(3)}"
        src.mkdir()
        (src / "f.txt").write_text("f")
        remote = sandbox.upload_dir(src)
        assert remote == sandbox.machine.resolve(src.name)
        assert sandbox.read_file(f"{src.name}/f.txt") == "f"
        sandbox.exec(["rm", "-rf", remote], timeout=60)

    def test_download_dir_made_in_sandbox(self, sandbox: Sandbox, scratch: str, tmp_path: Path) -> None:
        sandbox.exec(f"mkdir -p {scratch}/made/x && printf data > {scratch}/made/x/f.txt", timeout=60)
        sandbox.download_dir(f"{scratch}/made", tmp_path / "made")
        assert tree(tmp_path / "made") == {"x": None, "x/f.txt": b"data"}

    def test_ensure_dir(self, sandbox: Sandbox, scratch: str) -> None:
        sandbox.ensure_dir(f"{scratch}/e/f/g")
        sandbox.ensure_dir(f"{scratch}/e/f/g")
        assert sandbox.exec(["test", "-d", f"{scratch}/e/f/g"], timeout=60).exit_code == 0
        absolute = sandbox.machine.resolve(f"{scratch}/abs/dir")
        sandbox.ensure_dir(absolute)
        assert sandbox.exec(["test", "-d", absolute], timeout=60).exit_code == 0

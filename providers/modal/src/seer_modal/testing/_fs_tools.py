#!/usr/bin/env python3
"""``/__modal/.bin/modal-sandbox-fs-tools`` in every sandbox the fake control plane makes.

The modal SDK implements ``Sandbox.filesystem`` as execs of this tool with one JSON argument,
``{"<Command>": {...}}`` (see ``modal/_utils/sandbox_fs_utils.py``): file contents travel over the
exec's stdin and stdout, listings and stat results as JSON on stdout, and a failure as a JSON
object ``{"error_kind": ..., "message": ...}`` on stderr with a non-zero exit status, which the
SDK turns into its ``SandboxFilesystem*Error`` classes. Real Modal ships a Rust binary; this is
the same protocol in standard-library Python (the fake's images always have ``python3``). It is
copied into the container, never imported by the client.
"""

from __future__ import annotations

import errno
import grp
import json
import os
import pwd
import shutil
import stat
import sys

_KINDS = {
    errno.ENOENT: "NotFound",
    errno.EISDIR: "IsDirectory",
    errno.ENOTDIR: "NotDirectory",
    errno.EEXIST: "PathAlreadyExists",
    errno.ENOTEMPTY: "DirectoryNotEmpty",
    errno.EACCES: "PermissionDenied",
    errno.EPERM: "PermissionDenied",
    errno.EFBIG: "FileTooLarge",
}


class _Failure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _fail(exc: OSError) -> _Failure:
    kind = _KINDS.get(exc.errno or 0, "Other")
    return _Failure(kind, exc.strerror or str(exc))


def _info(path: str) -> dict[str, object]:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        kind, target = "symlink", os.readlink(path)
    elif stat.S_ISDIR(st.st_mode):
        kind, target = "directory", None
    else:
        kind, target = "file", None
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return {
        "name": os.path.basename(path.rstrip("/")) or "/",
        "path": path,
        "type": kind,
        "size": st.st_size,
        "mode": st.st_mode,
        "permissions": stat.filemode(st.st_mode),
        "owner": owner,
        "group": group,
        "modified_time": st.st_mtime,
        "symlink_target": target,
    }


def write_file(path: str) -> None:
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)


def read_file(path: str) -> None:
    if os.path.isdir(path):
        raise _Failure("IsDirectory", "Is a directory")
    with open(path, "rb") as src:
        shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
    sys.stdout.buffer.flush()


def list_files(path: str) -> None:
    if not os.path.exists(path):
        raise _Failure("NotFound", "No such file or directory")
    if not os.path.isdir(path):
        raise _Failure("NotDirectory", "Not a directory")
    entries = [_info(os.path.join(path, name)) for name in sorted(os.listdir(path))]
    json.dump(entries, sys.stdout)


def make_directory(path: str, parents: bool) -> None:
    if parents:
        os.makedirs(path, exist_ok=True)
    else:
        os.mkdir(path)


def remove(path: str, recursive: bool) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        if recursive:
            shutil.rmtree(path)
        else:
            os.rmdir(path)
    else:
        os.unlink(path)


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise _Failure("Other", "usage: modal-sandbox-fs-tools '<json command>'")
    ((command, args),) = json.loads(argv[1]).items()
    path = args["path"]
    if command == "WriteFile":
        write_file(path)
    elif command == "ReadFile":
        read_file(path)
    elif command == "ListFiles":
        list_files(path)
    elif command == "MakeDirectory":
        make_directory(path, bool(args.get("parents", True)))
    elif command == "Remove":
        remove(path, bool(args.get("recursive", False)))
    elif command == "Stat":
        json.dump(_info(path), sys.stdout)
    else:
        raise _Failure("NotSupported", f"the fake's modal-sandbox-fs-tools does not implement {command}")


if __name__ == "__main__":
    try:
        main(sys.argv)
    except _Failure as exc:
        json.dump({"error_kind": exc.kind, "message": str(exc)}, sys.stderr)
        sys.exit(1)
    except OSError as exc:
        failure = _fail(exc)
        json.dump({"error_kind": failure.kind, "message": str(failure)}, sys.stderr)
        sys.exit(1)

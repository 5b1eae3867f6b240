"""What seer-ssh runs on the remote host: ``python3 -c <this file> COMMAND ARGS...``.

Standard library only (the remote host has a Python, nothing else of seer's until a sandbox's
environment is made), and sent whole with every call, so the client and the remote never disagree
about its version. It keeps the **remote ledger**: one folder per sandbox under
``<base>/sandboxes/<id>/`` whose ``meta.json`` says what the sandbox is and whether it still runs,
so any client that can log in finds it again (``seer ls`` / ``seer down`` after a client crash).

Commands (each prints one JSON document on its last line of stdout):

* ``begin BASE ID META [FOLDERS [LINKS [- [ENVIRONMENT [WATCHDOG]]]]]``: make the sandbox's
  folders (0700), the shared ones named in ``FOLDERS`` and the symbolic links of ``LINKS`` (a
  pod's caches on its network volume), and write its record; with ``-``, its environment file
  (``env.sh``, 0600) from stdin (secrets never go on a command line); with ``ENVIRONMENT``,
  ``env``'s work too when there is nothing to build (the environment and the runtime ready);
  with ``WATCHDOG``, start the sandbox's watchdog (the kit's background process that ends it at
  its timeout) before answering, so a start is one call;
* ``update BASE ID CHANGES``: merge ``CHANGES`` (JSON) into a running sandbox's record;
* ``env BASE REQUIREMENTS WHEEL``: the virtual environment for a package set (one per distinct
  set and remote interpreter, under ``<base>/envs/<hash>``, built once under a lock and reused;
  one whose build was killed is removed by the next call) and seer's runtime unpacked from the
  uploaded wheel (``<base>/runtime/<sha>``); ``{"wheel": "missing"}`` at once when the wheel is
  not uploaded yet. With ``ID``, the sandbox's record gets the environment's Python and its
  environment file the lines that put the environment and the runtime first;
* ``end BASE ID STATUS [-- ARGV...]``: end a sandbox: record its status, keep its notebooks and
  outputs under ``<base>/outputs/<id>/`` when no client is there to copy them (``expired``,
  ``lost``), kill every process carrying its mark, remove its files; then exec ``ARGV`` if given
  (RunPod's watchdog terminates its own pod that way). Idempotent;
* ``ls BASE TTL [ID]``: the recorded sandboxes (or one); a running one whose watchdog is gone
  (the host rebooted) is ended here as ``expired`` or ``lost``; records ended more than ``TTL``
  seconds ago are removed.
"""

from __future__ import annotations

# What every call imports is kept to what every call needs: each call is a Python start on the
# host, on the path of every start and teardown, and shutil, subprocess, zipfile, hashlib and
# typing cost a Python start about half as much again (#27). The rest is imported where used.
import fcntl
import json
import os
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

MARK = "SEER_SSH_SANDBOX"
SLACK = 5.0
#: Seconds a running record may lack its watchdog (the start is making it) before ``ls`` reaps it.
START_GRACE = 120.0


def _sandbox_dir(base: str, sandbox_id: str) -> str:
    if not sandbox_id or "/" in sandbox_id or sandbox_id.startswith("."):
        raise SystemExit("bad sandbox id")
    return os.path.join(base, "sandboxes", sandbox_id)


def _read(path: str) -> Any:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _write(path: str, data: Any) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def _starttime(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _watchdog_alive(sb: str) -> bool:
    """Whether the sandbox's watchdog (a kit background process) still runs."""
    try:
        with open(os.path.join(sb, "work", ".seer", "procs", "watchdog.pid")) as fh:
            pid, start = fh.read().split()[:2]
    except (OSError, ValueError):
        return False
    return _starttime(int(pid)) == start


def begin(
    base: str,
    sandbox_id: str,
    meta: str,
    folders: str = "[]",
    links: str = "{}",
    env_file: str = "",
    environment: str = "",
    watchdog: str = "",
) -> dict[str, Any]:
    """The sandbox's folder and record, and ``folders`` (JSON list; relative ones are taken in the
    sandbox's folder) made private (0700) in the same call. ``links`` (JSON ``{link: target}``):
    each target made (0700) and ``link`` pointing at it, before the folders (which may lie behind
    them). ``env_file`` ``-``: the sandbox's environment file written from stdin (0600).
    ``environment`` (JSON ``{"requirements": [...], "wheel": path}``): when that environment and
    runtime are ready (:func:`ready_env`), the answer's ``env`` is ``env``'s, and no ``env`` call
    is needed. ``watchdog`` (JSON, see :func:`_start_watchdog`): the sandbox's watchdog started
    last, once its record and environment file are complete (the answer's ``watchdog``: its pid)."""
    sb = _sandbox_dir(base, sandbox_id)
    wanted = json.loads(folders)
    _links(json.loads(links))
    # the shared ones first: one that cannot be made leaves no sandbox folder behind
    _private_dirs([f for f in wanted if os.path.isabs(f)])
    os.makedirs(os.path.join(base, "sandboxes"), mode=0o700, exist_ok=True)
    os.mkdir(sb, 0o700)
    os.mkdir(os.path.join(sb, "work"), 0o700)
    try:
        _private_dirs([os.path.join(sb, f) for f in wanted if not os.path.isabs(f)])
        if env_file == "-":
            _write_text(os.path.join(sb, "env.sh"), sys.stdin.read())
    except BaseException:
        import shutil

        shutil.rmtree(sb, ignore_errors=True)
        raise
    record = json.loads(meta)
    record.update(id=sandbox_id, status="running")
    _write(os.path.join(sb, "meta.json"), record)
    made: dict[str, Any] = {"dir": sb, "workdir": os.path.join(sb, "work")}
    if environment and env_file == "-":
        wanted_env = json.loads(environment)
        made["env"] = ready_env(base, sandbox_id, wanted_env["requirements"], wanted_env["wheel"])
    if watchdog:
        made["watchdog"] = _start_watchdog(sb, sandbox_id, json.loads(watchdog))
    return made


#: ``bash -c WATCHDOG seer ENV_FILE WORKDIR SECONDS ARGV...``: the watchdog as the kit's
#: ``start_watchdog`` runs it, a sandbox command: the environment file read, in the working
#: folder; then the same process exec'd (its pid and start time kept) so that its own
#: environment carries the sandbox's mark, which ``end`` kills by; it runs ``ARGV`` after
#: ``SECONDS``.
WATCHDOG = """. "$1" || exit 1; cd -- "$2" || exit 1; shift 2; exec bash -c 'sleep "$0"; exec "$@"' "$@"
"""


def _start_watchdog(sb: str, sandbox_id: str, spec: dict[str, Any]) -> int:
    """Start the sandbox's watchdog as the kit's ``start_process`` would (in a session of its own,
    its output appended to ``spec["log"]``, ``<pid> <start time>`` in ``spec["pid_file"]``), to
    run ``spec["argv"]`` after ``spec["seconds"]``; its pid. Spawned, not forked: no module of
    ``subprocess``'s weight to import, and nothing of this call's streams is inherited, so the
    call's channel ends when this process does.

    It carries the sandbox's mark from its first instruction, not only once ``WATCHDOG`` has read
    the environment file and exec'd: ``end``, even one that comes right after this returns, finds
    it by that mark (``posix_spawn`` returns once the child has exec'd, its environment set)."""
    log, pid_file = spec["log"], spec["pid_file"]
    _private_dirs([os.path.dirname(log), os.path.dirname(pid_file)])
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        argv = ["bash", "-c", WATCHDOG, "seer", os.path.join(sb, "env.sh"), os.path.join(sb, "work")]
        pid = os.posix_spawnp(
            "bash",
            [*argv, str(spec["seconds"]), *spec["argv"]],
            {**os.environ, MARK: sandbox_id},
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, out, 1),
                (os.POSIX_SPAWN_DUP2, out, 2),
            ],
            setsid=True,
        )
    finally:
        os.close(out)
    started = _starttime(pid)
    if started is None:
        raise SystemExit(f"the sandbox's watchdog did not start (see {log})")
    _write_text(pid_file, f"{pid} {started}\n")
    return pid


def _links(links: dict[str, str]) -> None:
    """Each ``target`` a private folder and ``link`` a symbolic link to it (as ``ln -sfn``: a link
    already there is replaced, atomically; a real folder there is left as it is)."""
    _private_dirs(list(links.values()))
    for link, target in links.items():
        _private_dirs([os.path.dirname(link)])
        if os.path.islink(link) and os.readlink(link) == target:
            continue
        if os.path.lexists(link) and not os.path.islink(link):
            continue
        tmp = f"{link}.seer-tmp"
        try:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(target, tmp)
            os.replace(tmp, link)
        except OSError as exc:
            raise SystemExit(f"could not link {link} to {target}: {exc.strerror}") from None


def _write_text(path: str, text: str) -> None:
    """``text`` into ``path`` (0600), replacing it atomically."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _private_dirs(paths: list[str]) -> None:
    """Make each of ``paths`` (and its parents) a folder only its owner reads (0700)."""
    for path in paths:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            os.chmod(path, 0o700)
        except OSError as exc:
            why = f"{path}: {exc.strerror}"
            raise SystemExit(f"could not make seer's folders {', '.join(paths)}: {why}") from None


def update(base: str, sandbox_id: str, changes: str) -> dict[str, Any]:
    sb = _sandbox_dir(base, sandbox_id)
    with _locked(os.path.join(sb, ".lock")):
        meta = _read(os.path.join(sb, "meta.json"))
        if meta is None or meta.get("status") != "running":
            raise SystemExit(f"sandbox {sandbox_id} has ended")
        meta.update(json.loads(changes))
        _write(os.path.join(sb, "meta.json"), meta)
    return meta


def _locked(path: str) -> IO[str]:
    """An exclusive lock on ``path`` (made if missing), held while the returned file is open."""
    fh = open(path, "a")  # noqa: SIM115  (the caller's `with` closes it)
    fcntl.flock(fh, fcntl.LOCK_EX)
    return fh


def _run_logged(argv: list[str]) -> None:
    import subprocess

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        tail = ([*tail, line.rstrip()])[-30:]
    if proc.wait() != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def env(base: str, requirements: str, wheel: str, sandbox_id: str = "") -> dict[str, Any]:
    """The environment for ``requirements`` (JSON list) and seer's runtime from ``wheel`` (the
    uploaded file's path): ``{"python": ..., "runtime": ..., "built": bool}``, or
    ``{"wheel": "missing"}`` (nothing done) when ``wheel`` is not there: the client uploads it and
    asks again. With ``sandbox_id``, that sandbox's record gets the environment's ``python`` (as
    ``update`` would, without another call) and its environment file (``env.sh``) the lines
    that put the environment's ``bin`` first on ``PATH`` and the runtime on ``PYTHONPATH``."""
    import shutil
    import zipfile

    if not os.path.isfile(wheel):
        return {"wheel": "missing"}
    reqs = sorted(json.loads(requirements))
    envs = os.path.join(base, "envs")
    os.makedirs(envs, mode=0o700, exist_ok=True)
    _remove_killed_builds(envs)
    env_dir = _env_dir(base, reqs)
    built = False
    with _locked(env_dir + ".lock"):
        if not os.path.isfile(os.path.join(env_dir, ".seer-env-complete")):
            built = True
            shutil.rmtree(env_dir, ignore_errors=True)
            what = ", ".join(reqs) or "seer's runtime"
            print(f"building a Python environment for {what}", flush=True)
            try:
                # what the host's Python already has (a CUDA build of torch, say) counts
                _run_logged([sys.executable, "-m", "venv", "--system-site-packages", env_dir])
                if reqs:
                    pip = [os.path.join(env_dir, "bin", "python"), "-m", "pip", "install"]
                    _run_logged([*pip, "--disable-pip-version-check", "--progress-bar", "off", *reqs])
                _write(os.path.join(env_dir, ".seer-env-complete"), {"requirements": reqs})
            except BaseException:
                shutil.rmtree(env_dir, ignore_errors=True)
                raise
        else:
            print(
                f"the Python environment for this package set is there: reused ({os.path.basename(env_dir)})",
                flush=True,
            )
    runtime = wheel[: -len(".whl")]
    with _locked(runtime + ".lock"):
        if not os.path.isfile(os.path.join(runtime, ".complete")):
            shutil.rmtree(runtime, ignore_errors=True)
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(runtime)
            open(os.path.join(runtime, ".complete"), "w").close()
    python = os.path.join(env_dir, "bin", "python")
    if sandbox_id:
        update(base, sandbox_id, json.dumps({"python": python}))
        _use_env(_sandbox_dir(base, sandbox_id), env_dir, runtime)
    return {"python": python, "runtime": runtime, "built": built}


def _env_dir(base: str, reqs: list[str]) -> str:
    """Where the environment of the package set ``reqs`` (sorted) lives for this interpreter."""
    import hashlib

    key = hashlib.sha256(json.dumps([reqs, sys.executable, sys.version]).encode()).hexdigest()[:20]
    return os.path.join(base, "envs", key)


def ready_env(base: str, sandbox_id: str, requirements: list[str], wheel: str) -> dict[str, Any] | None:
    """``env``'s answer when there is nothing to build or unpack (the environment and the runtime
    complete: neither is ever removed once complete, so no lock is needed to see it), with
    what it records for the sandbox; else None (the client runs ``env``, streaming its output
    as a sandbox command)."""
    env_dir = _env_dir(base, sorted(requirements))
    runtime = wheel[: -len(".whl")]
    envs = os.path.dirname(env_dir)
    if not (
        os.path.isfile(wheel)
        and os.path.isfile(os.path.join(env_dir, ".seer-env-complete"))
        and os.path.isfile(os.path.join(runtime, ".complete"))
    ):
        return None
    _remove_killed_builds(envs)  # as ``env`` does on every call
    python = os.path.join(env_dir, "bin", "python")
    update(base, sandbox_id, json.dumps({"python": python}))
    _use_env(_sandbox_dir(base, sandbox_id), env_dir, runtime)
    return {"python": python, "runtime": runtime, "built": False}


def _use_env(sb: str, env_dir: str, runtime: str) -> None:
    """The sandbox's environment file with the environment and the runtime first (the lines
    appended once; the file replaced atomically, so a command reading it sees one or the other)."""
    import shlex

    path = os.path.join(sb, "env.sh")
    with open(path) as fh:
        text = fh.read()
    q = shlex.quote
    lines = (
        f'export PATH={q(os.path.join(env_dir, "bin"))}:"$PATH"\n'
        f"export VIRTUAL_ENV={q(env_dir)}\n"
        f"export PYTHONPATH={q(runtime)}\n"
    )
    if not text.endswith(lines):
        _write_text(path, text + lines)


def _remove_killed_builds(envs: str) -> None:
    """Remove every environment under ``envs`` left half-built by a build that was killed: one
    without its completion marker whose lock nobody holds (a build holds it until it ends, and
    a killed process's locks are released), so a package set never used again leaves nothing."""
    import shutil

    for name in os.listdir(envs):
        env_dir = os.path.join(envs, name)
        if name.endswith(".lock") or not os.path.isdir(env_dir):
            continue
        if os.path.isfile(os.path.join(env_dir, ".seer-env-complete")):
            continue
        with open(env_dir + ".lock", "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # being built now
            if not os.path.isfile(os.path.join(env_dir, ".seer-env-complete")):
                print(f"removing an environment whose build was killed ({name})", flush=True)
                shutil.rmtree(env_dir, ignore_errors=True)


def _marked(sandbox_id: str) -> list[int]:
    """PIDs of this user's processes carrying the sandbox's mark (this process excluded)."""
    needle = (f"{MARK}={sandbox_id}").encode()
    me = os.getpid()
    out: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    out.append(int(entry))
        except OSError:
            continue
    return out


def _kill_all(sandbox_id: str) -> None:
    for attempt in range(20):
        pids = _marked(sandbox_id)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        # a killed process is gone within milliseconds: look again soon, then less often
        time.sleep(min(0.05, 0.005 * 2**attempt))


def end(base: str, sandbox_id: str, status: str, then: list[str] | None = None) -> dict[str, Any]:
    import shutil

    sb = _sandbox_dir(base, sandbox_id)
    meta_path = os.path.join(sb, "meta.json")
    if os.path.isdir(sb):
        with _locked(os.path.join(sb, ".lock")):
            meta = _read(meta_path) or {"id": sandbox_id}
            first = meta.get("status", "running") == "running"
            if first:
                meta.update(status=status, ended_at=time.time())
            _kill_all(sandbox_id)
            work = os.path.join(sb, "work")
            if first and status != "terminated":
                # No client is copying them out: keep the agent's record on the host.
                kept = os.path.join(base, "outputs", sandbox_id)
                for name in ("notebooks", "outputs"):
                    src = os.path.join(work, name)
                    if os.path.isdir(src):
                        os.makedirs(kept, mode=0o700, exist_ok=True)
                        shutil.move(src, os.path.join(kept, name))
                        meta["kept"] = kept
            for name in os.listdir(sb):
                if name not in ("meta.json", ".lock"):
                    path = os.path.join(sb, name)
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        os.unlink(path)
            _write(meta_path, meta)
    if then:
        sys.stdout.flush()
        os.execvp(then[0], then)
    return {"status": (_read(meta_path) or {}).get("status")}


def ls(base: str, ttl: str, sandbox_id: str | None = None) -> list[dict[str, Any]]:
    import shutil

    root = os.path.join(base, "sandboxes")
    names = [sandbox_id] if sandbox_id else (sorted(os.listdir(root)) if os.path.isdir(root) else [])
    now = time.time()
    out = []
    for name in names:
        sb = _sandbox_dir(base, name)
        meta = _read(os.path.join(sb, "meta.json"))
        if meta is None:
            continue
        # a start makes the watchdog within seconds of its record: give it that long
        settled = now - float(meta.get("created_at") or now) > START_GRACE
        if meta.get("status") == "running" and settled and not _watchdog_alive(sb):
            expired = now >= float(meta.get("expires_at") or 0) - SLACK
            end(base, name, "expired" if expired else "lost")
            meta = _read(os.path.join(sb, "meta.json")) or meta
        if meta.get("status") != "running" and now - float(meta.get("ended_at") or now) > float(ttl):
            shutil.rmtree(sb, ignore_errors=True)
            continue
        out.append(meta)
    return out


def main(argv: list[str]) -> int:
    command, args = argv[0], argv[1:]
    result: Any
    if command == "end":
        cut = args.index("--") if "--" in args else len(args)
        base, sandbox_id, status = args[:3]
        result = end(base, sandbox_id, status, then=args[cut + 1 :] or None)
    else:
        commands: dict[str, Any] = {"begin": begin, "update": update, "env": env, "ls": ls}
        result = commands[command](*args)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

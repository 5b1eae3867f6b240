"""seer's supervisor: what a sandbox's SLURM job runs, ``python3 supervisor.py AGENT BASE ID``.

Standard library only (it runs with the node's system Python). It holds the job's allocation for
as long as the sandbox lives:

* it writes ``<BASE>/slurm/<ID>.node`` (its node's host name, the job id) so the client knows
  where the sandbox is once the job runs;
* it exits, ending the job and freeing its GPUs, once the sandbox has ended (its record under
  ``<BASE>/sandboxes/<ID>/`` says so: ``terminate``, or the watchdog at the timeout), or if no
  client made the sandbox within ``START_GRACE`` seconds of the job starting;
* on SIGTERM (``scancel``, or SLURM at the job's ``--time``) it ends the sandbox with seer-ssh's
  agent (``AGENT end``: every process carrying the sandbox's mark is killed, notebooks and outputs
  kept on the cluster, its files removed) as ``expired``: a client that ends it itself records
  ``terminated`` first, and the first status written stands;
* as it exits it removes its job script and node file (and its output, when the sandbox ended as
  it should: a job that ended otherwise keeps it, to say why).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

START_GRACE = 600.0


class _Stop(Exception):
    pass


def _stop(_signum: int, _frame: object) -> None:
    raise _Stop


def _status(meta_path: str) -> str | None:
    try:
        with open(meta_path) as fh:
            return str(json.load(fh).get("status"))
    except (OSError, ValueError):
        return None


def main(argv: list[str]) -> int:
    agent, base, sandbox_id = argv[:3]
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    node_file = os.path.join(base, "slurm", f"{sandbox_id}.node")
    info = {
        "node": os.environ.get("SLURMD_NODENAME"),
        "host": socket.gethostname(),
        "job": os.environ.get("SLURM_JOB_ID"),
        "pid": os.getpid(),
    }
    with open(node_file + ".tmp", "w") as fh:
        json.dump(info, fh)
    os.replace(node_file + ".tmp", node_file)
    meta = os.path.join(base, "sandboxes", sandbox_id, "meta.json")
    try:
        return _supervise(agent, base, sandbox_id, meta)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stem = os.path.join(base, "slurm", sandbox_id)
        ended = _status(meta) not in (None, "running")
        for suffix in (".sh", ".node", *([".log"] if ended else [])):
            try:
                os.unlink(stem + suffix)
            except OSError:
                pass


def _supervise(agent: str, base: str, sandbox_id: str, meta: str) -> int:
    started = time.monotonic()
    made = False
    try:
        while True:
            status = _status(meta)
            made = made or status is not None
            if status is not None and status != "running":
                return 0  # the sandbox ended: free the allocation
            if not made and time.monotonic() - started > START_GRACE:
                print(f"no client made sandbox {sandbox_id} in {START_GRACE:.0f} s: ending", flush=True)
                return 1
            time.sleep(1.0)
    except _Stop:
        if made or _status(meta) is not None:
            subprocess.run([sys.executable, agent, "end", base, sandbox_id, "expired"], check=False)
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

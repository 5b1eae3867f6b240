"""Any port of a sandbox through one of the encrypted tunnels Modal gave it at creation.

Modal opens tunnels only for the ports named when a sandbox is created (``encrypted_ports``), but
core picks its services' ports when it starts them (Jupyter, one RPC server per interface). So a
sandbox is created with a few tunnel ports (random ones, so that the fake control plane, whose
sandboxes share the host's network, does not run two sandboxes on one port), and
``expose_port(port)`` runs :data:`PICK` in the sandbox: it finds the tunnel port already relaying
to ``port``, or starts a relay (:data:`RELAY`) on a free one. The relay listens on all interfaces
(Modal's tunnel reaches the container from outside) and connects to ``127.0.0.1:<port>``, where
the service listens; it is a plain TCP relay, so websockets (Jupyter's kernels) pass, and the
service's own token still guards every request. A relay ends on its own once its service has
stopped listening for a while, freeing its tunnel for another port.

Both scripts are standard-library Python run with the sandbox's interpreter; everything is done in
one exec, so exposing a port costs one round trip.
"""

from __future__ import annotations

import random

__all__ = ["PICK", "RELAY", "STATE_DIR", "pick_tunnel_ports", "tunnel_url"]

#: Where relays record which port they serve (in the sandbox; not in a snapshot's workdir).
STATE_DIR = "/tmp/.seer-tunnels"
#: Tunnel ports are drawn from here: below Linux's ephemeral range, above well-known services.
_PORT_RANGE = (20000, 32000)

#: Whether a TCP port of the sandbox has a listener (from /proc: no tools needed in the image).
_LISTENING = r"""
def listening(port):
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) > 3 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False
"""

#: ``python -c RELAY <listen port> <target port>``: relay every connection to 127.0.0.1:<target>;
#: exit after the target has not listened for 30 s (or never did, within 10 minutes).
RELAY = (
    _LISTENING
    + r"""
import asyncio, sys, time
listen, target = int(sys.argv[1]), int(sys.argv[2])

async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, RuntimeError):
        writer.close()

async def handle(reader, writer):
    try:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    up_writer.close()
    writer.close()

async def main():
    server = await asyncio.start_server(handle, "0.0.0.0", listen, reuse_address=True)
    started, seen, gone = time.monotonic(), False, 0
    async with server:
        while True:
            await asyncio.sleep(1)
            if listening(target):
                seen, gone = True, 0
            else:
                gone += 1
            if (seen and gone >= 30) or (not seen and time.monotonic() - started > 600):
                return

asyncio.run(main())
"""
)

#: ``python -c PICK <state dir> <target port> <tunnel port>...``: print the tunnel port relaying to
#: the target, starting a relay on a free tunnel port if none does; exit 3 if every one is busy.
PICK = (
    _LISTENING
    + r"""
import json, os, subprocess, sys, time
state, target, ports, relay = sys.argv[1], int(sys.argv[2]), [int(p) for p in sys.argv[4:]], sys.argv[3]

def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False

os.makedirs(state, mode=0o700, exist_ok=True)
records = {}
for port in ports:
    try:
        with open(os.path.join(state, f"{port}.json")) as fh:
            records[port] = json.load(fh)
    except (OSError, ValueError):
        pass
for port, rec in records.items():
    if rec.get("target") == target and alive(rec.get("pid", 0)) and listening(port):
        print(port)
        sys.exit(0)
env = {k: v for k, v in os.environ.items() if k != "SEER_EXEC_ID"}
for port in ports:
    rec = records.get(port)
    if listening(port) or (rec and alive(rec.get("pid", 0))):
        continue
    with open(os.path.join(state, f"{port}.log"), "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", relay, str(port), str(target)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, env=env,
        )
    deadline = time.monotonic() + 10
    while proc.poll() is None and not listening(port) and time.monotonic() < deadline:
        time.sleep(0.02)
    if proc.poll() is None and listening(port):
        with open(os.path.join(state, f"{port}.json"), "w") as fh:
            json.dump({"target": target, "pid": proc.pid}, fh)
        print(port)
        sys.exit(0)
    proc.kill()
print(f"every tunnel port of this sandbox is in use ({', '.join(map(str, ports))})", file=sys.stderr)
sys.exit(3)
"""
)


def pick_tunnel_ports(count: int) -> list[int]:
    """``count`` distinct random ports for a new sandbox's tunnels."""
    return sorted(random.sample(range(*_PORT_RANGE), count))


def tunnel_url(host: str, port: int, tls: bool = True) -> str:
    """The client's URL of a tunnel: ``https://`` as Modal serves them; a tunnel on loopback is the
    fake control plane's, which speaks plain HTTP."""
    loopback = host in ("127.0.0.1", "localhost", "::1")
    scheme = "https" if tls and not loopback else "http"
    default = 443 if scheme == "https" else 80
    return f"{scheme}://{host}" + ("" if port == default else f":{port}")

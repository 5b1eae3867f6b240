"""The provider kit: what every provider that talks to its machine over exec would otherwise write.

A provider is glue between its SDK and seer's contract (:mod:`seer.providers.base`). Most of what
a machine must do (background processes that outlive the client, logs, killing a timed-out
command's whole tree, moving files and directories, knowing whether a sandbox that is gone
ended, expired or was lost) can be written once on top of two things the SDK gives: *run a
command* and *move bytes*. This package holds those generic pieces, one module each (every name
is importable from ``seer.providers.kit`` itself):

* :class:`OutputPump` (``kit.pump``): collects a command's output from however it arrives (pipes, a socket, an
  SDK's iterators), streams it to ``on_output``, and enforces the deadline: past it, the command
  is killed and :class:`~seer.errors.ExecTimeoutError` carries the output so far. A background
  child that keeps the streams open does not hold a finished command up. :func:`pump_popen` runs
  it over a local :class:`subprocess.Popen`.
* :class:`ExecMachine` (``kit.machine``): a :class:`~seer.providers.base.Machine` whose subclass supplies only
  :meth:`ExecMachine.run` (argv, env, cwd, stdin → exit code, output into a pump), ``status`` and
  ``expose_port``. It gets ``exec`` (strings through ``bash -c``, argv through ``env`` so a missing
  program answers 127, every process of a command marked so a timeout kills its whole tree),
  background processes done with shell in the machine (``setsid``, a pid + start-time record,
  process-group kill only of a group whose leader is verified), files and directories as tar
  streams (:meth:`ExecMachine.put_tar` / :meth:`ExecMachine.get_tar`: over exec by default, or the
  SDK's own archive calls), a lifetime watchdog for platforms without one, and the ledger hook.
* :class:`Ledger` (``kit.ledger``): the client-side record of a provider's sandboxes, under
  ``$SEER_HOME/<provider>/sandboxes/``, private (0600 in a 0700 folder) and expiring
  :data:`~seer.state.RECORD_TTL` after a sandbox ended. It tells ``terminated`` from ``expired``
  and ``lost`` once a machine is gone, reports ``starting`` while the starting client lives, and
  starts the *starter watch*: a small process on the client's host that ends a half-made sandbox
  at once if its starting client dies before ``Sandbox.start`` finished.
* :class:`StreamFrames` (``kit.frames``): Docker's multiplexed stdout/stderr stream, demultiplexed
  as it arrives (seer-docker's machines, seer-modal's fake).
* :func:`detect_gpus` / :func:`gpu_matches` (``kit.gpus``): the NVIDIA GPUs of the host a
  provider's machines run on (the local machine, a local Docker engine).

The toy provider in seer's tests (``tests/plugins/seer-toy-provider``) is a complete provider
built on this kit in under 150 lines; docs/providers.md walks through it.
"""

from seer.providers.kit.frames import StreamFrames
from seer.providers.kit.gpus import detect_gpus, gpu_matches
from seer.providers.kit.ledger import EXPIRY_SLACK, Ledger, watch_starter_main
from seer.providers.kit.machine import EXEC_MARK, KILL_MARKED, ExecMachine, kill_marked_argv
from seer.providers.kit.pump import OutputPump, pump_popen

__all__ = [
    "EXEC_MARK",
    "EXPIRY_SLACK",
    "KILL_MARKED",
    "ExecMachine",
    "Ledger",
    "OutputPump",
    "StreamFrames",
    "detect_gpus",
    "gpu_matches",
    "kill_marked_argv",
    "pump_popen",
    "watch_starter_main",
]

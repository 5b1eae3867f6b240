"""The kernel provisioner of seer's notebook servers (entry point ``seer-prestarted``): a
jupyter_client :class:`~jupyter_client.provisioning.LocalProvisioner` whose first launch adopts the
kernel the server launcher started before the server itself (:mod:`seer.runtime.prestart`), so that
kernel's imports overlap the server's start-up. Every other launch (later kernels, restarts) is
LocalProvisioner's own.

The adopted kernel is the server's child like any other, so polling, signals, interrupts and
shutdown work as for a kernel the server launched; the server writes the usual
``kernel-<id>.json`` for it (its ports and key), so clients find it where they look.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning import LocalProvisioner
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase

from seer.runtime import prestart

__all__ = ["PrestartedProvisioner"]


class PrestartedProvisioner(LocalProvisioner):
    """LocalProvisioner, adopting the pre-started kernel (once per server) when there is one."""

    _adopting: prestart.Prestarted | None = None
    _adopted: prestart.Prestarted | None = None

    def _can_adopt(self) -> bool:
        km = self.parent
        if km is None or getattr(km, "transport", "tcp") != "tcp":
            return False
        # The pre-started kernel has no CurveZMQ keys: only for servers that provision none.
        policy = getattr(km, "_transport_encryption_policy", None)
        return policy is None or policy() == "disabled"

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        found = prestart.claim() if self._can_adopt() else None
        if found is None:
            return dict(await super().pre_launch(**kwargs))
        km: Any = self.parent
        kwargs.pop("transport_encryption", None)
        kwargs.pop("extra_arguments", None)
        km.load_connection_info(found.connection)
        jupyter_session = (kwargs.get("env") or {}).get("JPY_SESSION_NAME", "")
        km.write_connection_file(jupyter_session=jupyter_session)
        self.connection_info = km.get_connection_info()
        # It keeps these ports when restarted, as a kernel LocalProvisioner launched keeps the
        # ones it cached (its kernel-<id>.json is not written again on a restart).
        self.ports_cached = True
        self._adopting = found
        return dict(await KernelProvisionerBase.pre_launch(self, cmd=list(found.argv), **kwargs))

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        found, self._adopting = self._adopting, None
        if found is None:
            return await super().launch_kernel(cmd, **kwargs)
        self._adopted = found
        self.process = found.process
        self.pid = found.process.pid
        try:
            self.pgid = os.getpgid(found.process.pid)
        except OSError:
            self.pgid = None
        self.cwd = kwargs.get("cwd", pathlib.Path.cwd())
        return self.connection_info

    async def cleanup(self, restart: bool = False) -> None:
        adopted, self._adopted = self._adopted, None
        if adopted is not None:  # the kernel it named is gone: a restart gets a connection file of its own
            prestart.remove_connection_file(adopted)
        await super().cleanup(restart=restart)

"""Finding a session again: a handle attached to a session made elsewhere (another process, an
MCP server), and ``sync``, which brings the notebook up to date with what its kernel ran."""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from seer.errors import (
    NotebookError,
)
from seer.notebook.client import (
    JupyterClient,
    quote_path,
)
from seer.notebook.document import (
    new_cell_id,
    source_text,
)
from seer.notebook.handle import KERNEL_KEY, NO_MODELS_TEXT, RECOVERED_KEY, RUNNING_KEY
from seer.notebook.lifecycle import SessionLifecycle
from seer.notebook.results import CellResult

if TYPE_CHECKING:
    from seer.sandbox import Sandbox


#: What a handle attaching to a kernel asks it: the models it holds, its sandbox, and its history
#: (the raw source of every cell run with history, by execution count; which ones have a value).
_KERNEL_STATE = """\
def __seer_kernel_state():
    import json, os
    ip = get_ipython()
    hist = ip.history_manager
    print(json.dumps({
        "model_info": globals().get("__seer_model_info__") or "",
        "sandbox_id": os.environ.get("SEER_SANDBOX_ID") or "",
        "kernel_run": getattr(getattr(getattr(ip, "kernel", None), "session", None), "session", ""),
        "inputs": list(hist.input_hist_raw),
        "values": sorted(n for n in hist.output_hist if isinstance(n, int)),
    }))
try:
    __seer_kernel_state()
finally:
    del __seer_kernel_state
"""


#: The display data (mime bundle) of the values of the cells numbered NUMBERS.
_KERNEL_VALUES = """\
def __seer_kernel_values(numbers):
    import json
    ip = get_ipython()
    out = {}
    for n in numbers:
        if n in ip.history_manager.output_hist:
            data, _ = ip.display_formatter.format(ip.history_manager.output_hist[n])
            out[n] = {k: v for k, v in data.items() if isinstance(v, str)}
    print(json.dumps(out))
try:
    __seer_kernel_values(NUMBERS)
finally:
    del __seer_kernel_values
"""


class KernelRecovery(SessionLifecycle):
    """Attaching to a session, and recovering what its kernel ran into the notebook."""

    @classmethod
    def attach(
        cls,
        jupyter_url: str,
        session_id: str,
        *,
        sandbox: Sandbox | None = None,
        outputs_dir: str | os.PathLike[str] | None = None,
        channel: str | None = None,
    ) -> Self:
        """A handle on a session created elsewhere (by another process), from ``jupyter_url`` and
        ``session_id``. Its notebook is read back and appended to: the live document every writer
        edits (cells not saved to the ``.ipynb`` yet included), or, where the server has none, the
        sandbox's saved ``.ipynb``, which is then written through the Jupyter contents API unless
        ``sandbox`` is given.

        Nothing the kernel ran is lost to the notebook: :meth:`sync` (run here when the kernel is
        idle) appends what the kernel ran that the notebook misses. ``channel`` is the kernel
        websocket's session key: a handle attaching again with the key an earlier one used (the
        notebook MCP server's ``seer-mcp-<session_id>``) is sent what the kernel sent meanwhile,
        so a cell the earlier one left running gets all its outputs. When the kernel is busy
        (:attr:`busy_at_attach`), that cell is still running: :meth:`sync` waits for it.
        """
        client = JupyterClient.from_url(jupyter_url)
        model = client.call("GET", f"/api/sessions/{session_id}", expect=(200,))
        path = model["path"]
        name = posixpath.splitext(posixpath.basename(path))[0]
        session = cls(
            client,
            session_id=session_id,
            kernel_id=model["kernel"]["id"],
            notebook_path=path,
            name=name,
            sandbox=sandbox,
            mirror_path=Path(outputs_dir) / f"{name}.ipynb" if outputs_dir else None,
        )
        session._attached(channel)
        return session

    def _attached(self, channel: str | None) -> None:
        """Join the live document and the kernel as :meth:`attach` does (``channel``: its key).
        The notebook is the live document's (every writer's cells, saved or not); only where the
        server has none is it read from the sandbox's saved ``.ipynb``."""
        self._channel_key = channel
        self._connect_document(new=False)
        if self._doc is None:
            self._read_saved()
        self._connect()
        if self._orphans or self._kernel_busy():
            # A cell runs (one an earlier handle started, or another client's): asking the kernel
            # anything now would wait for it. sync() does, when the caller is ready to.
            self.busy_at_attach = True
            self.model_info_text = (
                "The kernel is busy running a cell started before this attach; its models are listed "
                "once it finishes."
            )
        else:
            self.sync()

    def _read_saved(self) -> None:
        """Hold the notebook as saved in the sandbox's ``.ipynb`` (a server with no live
        document; a notebook not written yet stays empty)."""
        status, nb = self._client.request(
            "GET", f"/api/contents/{quote_path(self.notebook_path)}?type=notebook&content=1"
        )
        if status == 200 and isinstance(nb, dict) and isinstance(nb.get("content"), dict):
            self._nb.replace(list(nb["content"].get("cells", [])))
            self._nb.metadata.update(nb["content"].get("metadata") or {})

    def _kernel_busy(self) -> bool:
        """Whether the kernel runs a cell now (a moment's ``busy`` around a request does not count)."""
        for _ in range(5):
            model = self._kernel_model()
            if model is None or model.get("execution_state") != "busy":
                return False
            time.sleep(0.1)
        return True

    def sync(self) -> list[CellResult]:
        """Bring the notebook up to date with what its kernel ran; return the cells recovered.

        Waits for a cell an earlier client left running (recording its outputs), then asks the
        kernel for its history (IPython's raw inputs and ``Out``) and appends the executed cells the
        notebook misses after the last one it holds, in order, each with its value (printed output
        is gone by then); a cell still marked running gets its execution count and value.
        Refreshes ``model_info_text`` and ``sandbox_id``. Safe to call any time.
        """
        with self._lock:
            before = len(self.recovered)
            state_cell = self._run(_KERNEL_STATE, hidden=True, timeout=None, record=False)
            for orphan in list(self._orphans.values()):  # finished, whatever arrived of them
                self._fold(orphan)
            try:
                state = json.loads(state_cell.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError) as exc:
                raise NotebookError(f"the kernel did not report its history: {state_cell}") from exc
            self.model_info_text = state.get("model_info") or NO_MODELS_TEXT
            self.sandbox_id = state.get("sandbox_id") or self.sandbox_id
            self.busy_at_attach = False
            doc = self._doc
            if doc is not None:
                # What other writers put into the live document before the kernel answered is
                # here before the history is matched against it. (Only narrows the window: a
                # writer's cell arriving later replaces its recovered twin, see _pull; without an
                # answer, the history is matched against the document as held here.)
                with contextlib.suppress(NotebookError):
                    doc.round_trip()
                self._pull()
            self._reconcile(
                list(state.get("inputs") or []),
                set(state.get("values") or []),
                str(state.get("kernel_run") or "") or None,
            )
            return self.recovered[before:]

    def _reconcile(self, inputs: list[str], values: set[int], kernel_run: str | None = None) -> None:
        """(Under the lock.) Match the kernel's history (``inputs[n]``: the source of In [n]) with
        the notebook's code cells, in order; record what is missing after the last match.

        A recovered cell is marked (:data:`RECOVERED_KEY`, and :data:`KERNEL_KEY`: ``kernel_run``,
        the kernel process its count comes from): the writer that ran it may not have put its own
        cell into the live document yet (it does as the cell ends); once it has, the recovered
        twin goes (``NotebookReplica._pull``), so the cell is in the notebook once."""
        code_cells = [c for c in self._nb.cells if c.get("cell_type") == "code"]
        matched: dict[int, dict[str, Any]] = {}
        pos = 0
        for n in range(1, len(inputs)):
            source = str(inputs[n]).strip()
            for j in range(pos, len(code_cells)):
                cell = code_cells[j]
                if source_text(cell.get("source", "")).strip() == source and cell.get("execution_count") in (
                    n,
                    None,
                ):
                    matched[n] = cell
                    pos = j + 1
                    break
        last = max(matched, default=0)
        wanted: dict[int, dict[str, Any]] = {}
        changed = False
        for n, cell in matched.items():
            if RUNNING_KEY in cell.get("metadata", {}):
                cell["metadata"].pop(RUNNING_KEY)
                cell["execution_count"] = n
                self._nb.touch(cell)
                changed = True
                if n in values and not any(o.get("output_type") == "execute_result" for o in cell["outputs"]):
                    wanted[n] = cell
        for n in range(last + 1, len(inputs)):
            cell = {
                "cell_type": "code",
                "execution_count": n,
                "id": new_cell_id(),
                "metadata": {RECOVERED_KEY: True, **({KERNEL_KEY: kernel_run} if kernel_run else {})},
                "outputs": [],
                "source": str(inputs[n]),
            }
            self._nb.add(cell)
            changed = True
            if n in values:
                wanted[n] = cell
            else:
                self.recovered.append(CellResult(code=cell["source"], execution_count=n))
        if wanted:
            got = self._run(
                _KERNEL_VALUES.replace("NUMBERS", repr(sorted(wanted))), hidden=True, timeout=60, record=False
            )
            try:
                bundles = json.loads(got.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                bundles = {}
            for n, cell in sorted(wanted.items()):
                data = bundles.get(str(n))
                if data:
                    cell["outputs"].append(
                        {"output_type": "execute_result", "execution_count": n, "data": data, "metadata": {}}
                    )
                    self._nb.touch(cell)
                self.recovered.append(
                    CellResult(
                        code=source_text(cell["source"]),
                        result=(data or {}).get("text/plain"),
                        outputs=cell["outputs"],
                        execution_count=n,
                    )
                )
        if changed:
            self.save()

"""A :class:`~seer.progress.Progress` that keeps what a start reports, for tests that assert on it
(what was built, copied, cached or reused): the provider tests and ``tests/_code_server_kit.py``.
"""

from __future__ import annotations

from seer.progress import Progress


class RecordingProgress(Progress):
    """Progress that keeps every line a start reports (an image build's log among them), and the
    notes a teardown adds."""

    def __init__(self) -> None:
        super().__init__(enabled=False)
        self.lines: list[str] = []

    def update(self, text: str) -> None:
        self.lines.append(text)

    def note(self, text: str) -> None:
        self.lines.append(text)

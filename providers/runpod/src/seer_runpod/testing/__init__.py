"""seer-runpod's test kit: a fake RunPod API for testing against the real runpod SDK.

:class:`FakeRunPod` serves RunPod's GraphQL API on 127.0.0.1 and realises every pod as a real
SSH-able container (:class:`seer_ssh.testing.SshHost`); see ``providers/runpod/README.md``. For
pytest, import the ``fake_runpod`` fixture from :mod:`seer_runpod.testing.pytest_plugin`.
"""

from seer_runpod.testing.fake import FAKE_LABEL, NO_CAPACITY, Call, FakeRunPod, Pod
from seer_runpod.testing.schema import CPU_INSTANCES, GPU_TYPES, GpuType

__all__ = ["CPU_INSTANCES", "FAKE_LABEL", "GPU_TYPES", "NO_CAPACITY", "Call", "FakeRunPod", "GpuType", "Pod"]

"""seer-modal's test kit: a fake Modal control plane for testing against the real SDK.

``FakeModal`` serves Modal's gRPC protocol on 127.0.0.1 and realises every sandbox, image layer,
volume and snapshot on the local Docker engine; see ``providers/modal/README.md``. For pytest,
import the ``fake_modal`` fixture from :mod:`seer_modal.testing.pytest_plugin`.
"""

from seer_modal.testing.fake import BUILDER_VERSION, DEFAULT_BASE_IMAGE, LOCAL_PIP_OPTIONS, FakeModal

__all__ = ["BUILDER_VERSION", "DEFAULT_BASE_IMAGE", "LOCAL_PIP_OPTIONS", "FakeModal"]

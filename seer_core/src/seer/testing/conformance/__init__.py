"""The provider conformance suite: the contract every provider passes, as pytest tests.

A provider package subclasses :class:`ProviderConformance` in its tests, names its provider and
inherits every test (the pattern of langchain's standard tests and tox's test kit)::

    from seer.testing import ProviderConformance

    class TestMyProviderConformance(ProviderConformance):
        provider_name = "my-provider"

To start the suite's sandboxes with more than the defaults (an image, a region, provider options),
override the class-scoped ``sandbox_config`` fixture; every sandbox the suite starts is derived
from it (with the suite's own env and secret added)::

    class TestMyProviderConformance(ProviderConformance):
        provider_name = "my-provider"
        expiry_timeout = 60  # the class attributes below tune the suite to the provider

        @pytest.fixture(scope="class")
        @classmethod
        def sandbox_config(cls):
            return SandboxConfig(provider="my-provider", execution_mode="cli", timeout=900,
                                 provider_options={"image": "python:3.12-slim"})

What is tested goes through the public surface (:class:`~seer.sandbox.Sandbox`, and
``sandbox.machine`` for the primitives ``Sandbox`` does not wrap): lifecycle, exec semantics,
files, background processes, port exposure, clean-up after a failed start, a sandbox outliving
its killed client, errors after terminate, and, gated on the provider class's ``capabilities``,
snapshots and GPUs. A test gated on a capability the provider lacks skips with ``provider lacks
capability: <name>``. A test the provider cannot run here for another reason (a fake control
plane's machines have no GPU) is named in ``skip_tests`` with that reason; a test class that
redefines a conformance test fails the suite's guard (``test_conformance_tests_run_as_written``
and the failing test itself), so every test runs as written or is skipped with a reason::

    class TestMyProviderConformance(ProviderConformance):
        provider_name = "my-provider"
        skip_tests = {"test_gpu": "the fake's machines have no GPU; SEER_MY_LIVE=1 runs it"}

The suite is one mixin per area (``config_checks``, ``lifecycle``, ``exec``, ``files``,
``processes``, ``capabilities``) on a base of fixtures and helpers (``base``, ``helpers``),
composed here into :class:`ProviderConformance`.

Most tests share one sandbox per class (each works in its own scratch directory), so the suite
stays fast; tests that end a sandbox start their own. Every sandbox is terminated in a fixture
finalizer, pass or fail. The suite assumes a Linux machine with bash and the sandbox's Python.
"""

from seer.testing.conformance.base import ConformanceBase
from seer.testing.conformance.capabilities import CapabilityTests
from seer.testing.conformance.config_checks import ConfigChecks
from seer.testing.conformance.exec import ExecTests
from seer.testing.conformance.files import FileTests
from seer.testing.conformance.helpers import live_processes, wait_for
from seer.testing.conformance.lifecycle import LifecycleTests
from seer.testing.conformance.processes import ProcessTests

__all__ = [
    "CapabilityTests",
    "ConfigChecks",
    "ConformanceBase",
    "ExecTests",
    "FileTests",
    "LifecycleTests",
    "ProcessTests",
    "ProviderConformance",
    "live_processes",
    "wait_for",
]


class ProviderConformance(ConfigChecks, LifecycleTests, ExecTests, FileTests, ProcessTests, CapabilityTests):
    """The provider contract. Subclass it (as ``Test...``) and set :attr:`provider_name`."""

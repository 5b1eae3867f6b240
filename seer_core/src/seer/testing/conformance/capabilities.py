"""Capability-gated tests: snapshots and GPUs, skipped with ``provider lacks capability: <name>``
where the provider's class does not offer them."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from seer.config import SandboxConfig
from seer.errors import CapabilityError
from seer.providers.base import Capabilities, MachineStatus, Provider, Snapshot
from seer.sandbox import Sandbox
from seer.testing.conformance.base import ConformanceBase


class CapabilityTests(ConformanceBase):
    """Capability-gated tests: snapshots and GPUs, skipped with ``provider lacks capability: <name>``
    where the provider's class does not offer them."""

    def test_snapshot_restores_files(
        self, provider: Provider, capabilities: Capabilities, start_sandbox: Callable[..., Sandbox]
    ) -> None:
        if not capabilities.snapshots:
            pytest.skip("provider lacks capability: snapshots")
        sb = start_sandbox(name="conformance-snap")
        sb.write_file("snap/text.txt", "before")
        sb.write_file("snap/deep/all.bin", bytes(range(256)))
        snaps: list[Snapshot] = []
        try:
            first = sb.snapshot("first")
            snaps.append(first)
            assert (first.provider, first.sandbox_id, first.description) == (
                self.provider_name,
                sb.sandbox_id,
                "first",
            )
            as_json = json.loads(json.dumps(first.to_dict()))
            assert Snapshot.from_dict(as_json) == first
            sb.write_file("snap/text.txt", "after")
            second = sb.terminate(save_snapshot=True, snapshot_description="second")
            assert isinstance(second, Snapshot)
            snaps.append(second)
            assert sb.status is MachineStatus.TERMINATED

            restored = start_sandbox(name="conformance-restored", snapshot=as_json)
            assert restored.sandbox_id != sb.sandbox_id
            assert restored.status is MachineStatus.RUNNING
            assert restored.read_file("snap/text.txt") == "before"
            assert restored.read_bytes("snap/deep/all.bin") == bytes(range(256))
            assert restored.exec(["cat", "snap/text.txt"], timeout=60).stdout == "before"
            later = start_sandbox(name="conformance-restored-2", snapshot=second)
            assert later.read_file("snap/text.txt") == "after"
        finally:
            for snap in snaps:
                provider.delete_snapshot(snap)

    def test_snapshot_unsupported_raises(self, capabilities: Capabilities, sandbox: Sandbox) -> None:
        if capabilities.snapshots:
            pytest.skip("provider has capability: snapshots (see test_snapshot_restores_files)")
        with pytest.raises(CapabilityError):
            sandbox.snapshot("nope")

    # === capability: GPUs ========================================================================
    def test_gpu(
        self,
        provider: Provider,
        capabilities: Capabilities,
        sandbox_config: SandboxConfig,
        start_sandbox: Callable[..., Sandbox],
    ) -> None:
        if not capabilities.gpu_types or capabilities.max_gpu_count < 1:
            pytest.skip("provider lacks capability: gpu_types")
        gpu = self.gpu_type
        if gpu is None:
            for candidate in sorted(capabilities.gpu_types):
                config = self.derive(sandbox_config, gpu=candidate, gpu_count=self.gpu_count)
                if not type(provider).check_config(config):
                    gpu = candidate
                    break
            else:
                pytest.skip(
                    f"none of the provider's GPU types is available here: {sorted(capabilities.gpu_types)}"
                )
        sb = start_sandbox(name="conformance-gpu", gpu=gpu, gpu_count=self.gpu_count)
        result = sb.exec("nvidia-smi --query-gpu=name --format=csv,noheader", timeout=120)
        assert result.exit_code == 0, result.output
        assert len(result.stdout.strip().splitlines()) >= self.gpu_count, result.stdout

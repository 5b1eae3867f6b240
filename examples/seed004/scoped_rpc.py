"""Seed 004 Example 3: GPU functions served from a scoped sandbox over RPC, as MCP tools.

    python examples/seed004/scoped_rpc.py

As the seed: a scoped sandbox serves an interface file as an MCP server and a local session gets
it in its workspace. The interface imports seer-toolkit, whose modules are uploaded beside it
first (a scoped sandbox has no notebook kernel to get them by default). Then the served functions
are called from local code, and everything is torn down.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import seer_toolkit
from _models import seed_models
from seer.environment import ModelConfig, SandboxConfig, ScopedSandbox
from seer.execution import create_local_session
from seer.rpc import RpcClient
from seer.workspace import Workspace

REAL_MODELS = False  # True: the seed's google/gemma-2-9b-it on an A100
MODELS = seed_models(REAL_MODELS)


async def main() -> None:
    example_dir = Path(__file__).parent / "scoped_rpc"

    config = SandboxConfig(
        gpu=MODELS.gpu,
        models=[ModelConfig(name=MODELS.model)],
        python_packages=["torch", "transformers"],
        env={"SEER_EXAMPLE_MODEL": MODELS.model},
        timeout=900,
    )
    scoped = ScopedSandbox(config)
    scoped.start()
    try:
        # The toolkit's modules, beside the interface, before it is served (it imports them).
        for library in seer_toolkit.libraries():
            scoped.upload_file(seer_toolkit.module_path(library.name))

        interface = scoped.serve(
            str(example_dir / "steering_interface.py"), expose_as="mcp", name="steering_tools"
        )
        with tempfile.TemporaryDirectory(prefix="seer-example-") as workspace_dir:
            session = create_local_session(
                workspace=Workspace(libraries=[interface]),
                workspace_dir=workspace_dir,
                name="steering-experiment",
            )
            # session.mcp_config is what the agent's harness loads: the interface's MCP server.
            print(json.dumps({"status": "ready", "mcp_servers": sorted(session.mcp_config)}))

            # Local code calling the served functions (what the MCP tools call).
            env = interface["env"]
            client = RpcClient(env["SEER_RPC_URL"], env["SEER_RPC_TOKEN"])
            steered = client.call(
                "steer", "What do you think?", "I strongly agree.", "I disagree.", MODELS.layer
            )
            print(json.dumps({"steer": steered}))
            print(json.dumps({"lens": client.call("lens", "The quick brown fox")}))
    finally:
        scoped.terminate()


if __name__ == "__main__":
    asyncio.run(main())

"""seer's quickstart: a sandbox on the built-in local provider, start to finish.

    python examples/quickstart.py

Starts a CPU sandbox whose Python has numpy, runs code in it, moves a file in and back out, and
tears it down. On the local provider a sandbox is a working directory plus processes on this
machine, watched by a supervisor that removes it at terminate() or when its timeout passes; if
this script's Python lacks numpy, the sandbox gets a cached overlay environment that adds it.
"""

from __future__ import annotations

import json
import time

from seer import ExecutionMode, Sandbox, SandboxConfig


def main() -> None:
    config = SandboxConfig(
        gpu=None,  # CPU; e.g. gpu="A100" on a provider (or machine) that has one
        python_packages=["numpy"],
        execution_mode=ExecutionMode.CLI,  # a plain shell: no Jupyter server needed here
        env={"GREETING": "hello from the config"},
        timeout=600,  # the sandbox tears itself down after 10 minutes, whatever happens here
    )
    t0 = time.monotonic()
    sandbox = Sandbox(config).start(name="quickstart")
    try:
        print(f"started sandbox {sandbox.sandbox_id} on the {sandbox.provider!r} provider", end="")
        print(f" in {time.monotonic() - t0:.1f} s")
        print(f"  working directory: {sandbox.workdir}")

        # A shell command: a string runs through bash, so pipes and variables work.
        result = sandbox.exec('echo "$GREETING" | tr a-z A-Z', check=True)
        print(f"  exec: {result.stdout.strip()!r} (exit {result.exit_code})")

        # Python code, run by the sandbox's interpreter (the one with python_packages).
        code = (
            "import numpy as np\n"
            "x = np.arange(1, 11)\n"
            "print(f'numpy {np.__version__}: sum={x.sum()} mean={x.mean()}')\n"
        )
        print(f"  exec_python: {sandbox.exec_python(code, check=True).stdout.strip()}")

        # Files: write one into the sandbox, let code there read it and write a result, read that.
        sandbox.write_file("inputs/numbers.json", json.dumps([3, 1, 4, 1, 5, 9, 2, 6]))
        sandbox.ensure_dir("outputs")
        sandbox.exec_python(
            "import json, numpy as np\n"
            "xs = np.array(json.load(open('inputs/numbers.json')))\n"
            "summary = {'n': int(xs.size), 'max': int(xs.max()), 'sorted': sorted(xs.tolist())}\n"
            "json.dump(summary, open('outputs/summary.json', 'w'))\n",
            check=True,
        )
        summary = json.loads(sandbox.read_file("outputs/summary.json"))
        print(f"  wrote inputs/numbers.json, read back outputs/summary.json: {summary}")
        assert summary == {"n": 8, "max": 9, "sorted": [1, 1, 2, 3, 4, 5, 6, 9]}, summary
    finally:
        sandbox.terminate()
    print(f"terminated: status is now {sandbox.status.value!r}; nothing is left running")


if __name__ == "__main__":
    main()

"""What a pod runs at its timeout, after seer-ssh's watchdog ended the sandbox in it:
``python3 -c <this file> API_URL POD_ID``, terminating the pod itself through RunPod's API.

Standard library only (it runs on the pod's own Python), sent whole as the watchdog's command.
The key is the pod's own (RunPod gives every pod one in ``RUNPOD_API_KEY``; it reaches that pod
only); from a shell that lacks it, it is read from the pod's first process. The API's URL is the
one the client used (``RUNPOD_API_BASE_URL``), passed in: real pods get no variable naming it.
Retried with back-off, for an API that is briefly away: a pod left running bills by the hour.
The pod's id is sent as a GraphQL variable, never written into the query.
"""

import json
import os
import sys
import time
import urllib.request


def pod_key() -> str | None:
    key = os.environ.get("RUNPOD_API_KEY")
    if key:
        return key
    try:
        with open("/proc/1/environ", "rb") as fh:
            for item in fh.read().split(b"\0"):
                name, _, value = item.partition(b"=")
                if name == b"RUNPOD_API_KEY":
                    return value.decode()
    except OSError:
        pass
    return None


def terminate(url: str, pod_id: str, attempts: int = 12) -> int:
    # the pod's id goes as a GraphQL variable, never into the query's text
    body = json.dumps(
        {
            "query": "mutation SeerTerminate($podId: String!) { podTerminate(input: {podId: $podId}) }",
            "variables": {"podId": pod_id},
            "operationName": "SeerTerminate",
        }
    ).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {pod_key()}"}
    for attempt in range(attempts):
        try:
            request = urllib.request.Request(url.rstrip("/") + "/graphql", data=body, headers=headers)
            with urllib.request.urlopen(request, timeout=30) as response:
                answer = json.loads(response.read() or b"{}")
            if not answer.get("errors"):
                print(f"pod {pod_id} terminated itself at its timeout", flush=True)
                return 0
            print(f"the API refused: {answer['errors']}", flush=True)
        except Exception as exc:
            print(f"the API did not answer: {exc}", flush=True)
        time.sleep(min(60, 2**attempt))
    return 1


if __name__ == "__main__":
    sys.exit(terminate(sys.argv[1], sys.argv[2]))

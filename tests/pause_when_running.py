"""Run as a process: ``python pause_when_running.py URL N`` pauses the vLLM server at URL in keep mode
(``POST /pause?mode=keep``) as soon as its ``/metrics`` count ``N`` requests admitted, at least one of them running
(the others may wait a step: a request whose prompt prefix another is computing waits for it), and exits 0.

The tests that freeze turns mid-decode (tests/policy/test_policy_server.py) used to pause from the pytest process once a
short turn sent after the long ones had finished. In full-suite runs that process was seen to stand still for 2-6 s
at a time (its event loop and its threads alike, while the servers kept decoding), long enough for 700 ids to
finish before its pause was even sent. This process is small (httpx only) and does nothing else: it prints
``ready`` once it has read the metrics, then polls them every few milliseconds.
"""

from __future__ import annotations

import sys
import time

import httpx

GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")


def requests(client: httpx.Client, url: str) -> tuple[int, int]:
    """Requests the server is running and waiting to run now (summed over its engines), from its Prometheus text."""
    lines = client.get(f"{url}/metrics").raise_for_status().text.splitlines()
    running, waiting = (
        sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(g + "{")) for g in GAUGES
    )
    return int(running), int(waiting)


def main(url: str, wanted: int, timeout_s: float = 300.0) -> int:
    with httpx.Client(timeout=60) as client:
        running, waiting = requests(client, url)
        print("ready", flush=True)
        deadline = time.monotonic() + timeout_s
        while running < 1 or running + waiting < wanted:
            if time.monotonic() > deadline:
                print(f"{url} never held {wanted} requests in {timeout_s} s ({running} running, {waiting} waiting)")
                return 1
            time.sleep(0.003)
            running, waiting = requests(client, url)
        client.post(f"{url}/pause", params={"mode": "keep", "clear_cache": "false"}).raise_for_status()
        print(f"paused with {running} running, {waiting} waiting", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))

"""Run inside a fresh network namespace (``unshare -rn``): bring up its
loopback, start ``trio-mcp run … -t http --host 0.0.0.0 --port 0`` (bound to
every interface of a namespace that has only loopback, so nothing is exposed),
send requests with chosen ``Host`` headers, print what came back as JSON, and
stop the server. Arguments: the CLI's extra options."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
from _procs import EXAMPLE, HEADERS, INIT, ROOT, stop_group  # run as a script: its folder is on the path


def main() -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trio_mcp.cli",
            "run",
            EXAMPLE,
            "-t",
            "http",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ]
        + sys.argv[1:],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        assert server.stderr is not None
        first = server.stderr.readline()
        second = server.stderr.readline()
        port = int(first.strip().rsplit(":", 1)[1].split("/", 1)[0])
        statuses = {}
        with httpx.Client(timeout=10) as client:
            for host in sys.stdin.read().split():
                answer = client.post(
                    f"http://127.0.0.1:{port}/mcp",
                    content=json.dumps(INIT),
                    headers={**HEADERS, "host": host},
                )
                statuses[host] = answer.status_code
        print(json.dumps({"lines": [first, second], "statuses": statuses}))
    finally:
        stop_group(server)


if __name__ == "__main__":
    main()

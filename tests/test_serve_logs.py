"""``lightmem serve`` and ``lightmem mcp --transport http`` as a first-time user runs them:
they say where they listen, log each request (never the key) and say when they stop."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

CLI = [sys.executable, "-m", "lightmem.cli.main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Server:
    """A CLI server in a subprocess, its stderr collected line by line."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [*CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, url: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(url, timeout=2)
                return
            except httpx.TransportError:
                assert self.proc.poll() is None, "\n".join(self.lines)
                time.sleep(0.2)
        raise AssertionError("server did not start:\n" + "\n".join(self.lines))

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        self._reader.join(timeout=10)
        return "\n".join(self.lines)


def _key(data_dir: Path) -> str:
    out = subprocess.run(
        [*CLI, "keys", "create", "--tenant", "acme", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    key: str = json.loads(out.stdout)["key"]
    return key


def test_serve_says_where_it_listens_logs_requests_and_stops(tmp_path: Path) -> None:
    data, port = tmp_path / "data", _free_port()
    key = _key(data)
    server = _Server(["serve", "--port", str(port), "--data-dir", str(data)])
    base = f"http://127.0.0.1:{port}"
    server.wait_for(f"{base}/docs")
    r = httpx.post(
        f"{base}/v1/memories/search",
        json={"query": "anything"},
        headers={"Authorization": f"Bearer {key}"},
        params={"note": key},  # a key in a query string must not reach the log either
        timeout=120,  # the first request opens the tenant's store and loads the embedder
    )
    assert r.status_code == 200
    log = server.stop()
    assert f"REST API {base}/v1, OpenAPI docs {base}/docs, viewer {base}/ui/" in log
    assert re.search(r"POST /v1/memories/search 200 \d+\.\dms", log), log
    assert re.search(r"GET /docs 200 \d+\.\dms", log), log
    assert log.rstrip().endswith("lightmem serve: stopped"), log
    assert key not in log and key.split("_")[1] not in log


def test_mcp_over_http_says_its_url(tmp_path: Path) -> None:
    data, port = tmp_path / "data", _free_port()
    _key(data)
    server = _Server(["mcp", "--transport", "http", "--port", str(port), "--data-dir", str(data)])
    url = f"http://127.0.0.1:{port}/mcp"
    server.wait_for(url)
    log = server.stop()
    assert f"streamable HTTP at {url}" in log, log
    assert re.search(r"GET /mcp 401 \d+\.\dms", log), log  # wait_for had no key
    assert log.rstrip().endswith("lightmem mcp: stopped"), log

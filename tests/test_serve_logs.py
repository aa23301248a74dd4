"""``lightmem serve`` and ``lightmem mcp --transport http`` as a first-time user runs them:
they say where they listen, log each request (never the key) and say when they stop."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from inprocess_cli import run

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


@pytest.fixture
def start() -> Iterator[Callable[[list[str]], _Server]]:
    """Starts CLI servers; any still running when the test ends (it failed before
    stopping them) is killed, not left serving."""
    made: list[_Server] = []

    def start(args: list[str]) -> _Server:
        made.append(_Server(args))
        return made[-1]

    yield start
    for server in made:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=10)


def _key(data_dir: Path) -> str:
    out = subprocess.run(
        [*CLI, "keys", "create", "--tenant", "acme", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    key: str = json.loads(out.stdout)["key"]
    return key


def test_serve_says_where_it_listens_logs_requests_and_stops(
    tmp_path: Path, start: Callable[[list[str]], _Server]
) -> None:
    data, port = tmp_path / "data", _free_port()
    key = _key(data)
    server = start(["serve", "--port", str(port), "--data-dir", str(data)])
    base = f"http://127.0.0.1:{port}"
    server.wait_for(f"{base}/docs")
    r = httpx.post(
        f"{base}/v1/memories/search",
        json={"query": "anything"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=120,  # the first request opens the tenant's store and loads the embedder
    )
    assert r.status_code == 200
    r = httpx.get(  # a key in a query string must not reach the log either
        f"{base}/v1/memories",
        params={"user_id": key},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    log = server.stop()
    assert f"REST API {base}/v1, OpenAPI docs {base}/docs, viewer {base}/ui/" in log
    assert re.search(r"POST /v1/memories/search 200 \d+\.\dms", log), log
    assert re.search(r"GET /docs 200 \d+\.\dms", log), log
    assert log.rstrip().endswith("lightmem serve: stopped"), log
    assert key not in log and key.split("_")[1] not in log


def test_mcp_over_http_says_its_url(tmp_path: Path, start: Callable[[list[str]], _Server]) -> None:
    data, port = tmp_path / "data", _free_port()
    _key(data)
    server = start(["mcp", "--transport", "http", "--port", str(port), "--data-dir", str(data)])
    url = f"http://127.0.0.1:{port}/mcp"
    server.wait_for(url)
    log = server.stop()
    assert f"streamable HTTP at {url}" in log, log
    assert re.search(r"GET /mcp 401 \d+\.\dms", log), log  # wait_for had no key
    assert log.rstrip().endswith("lightmem mcp: stopped"), log


def test_an_address_it_cannot_listen_on_is_refused_before_it_says_it_listens(
    tmp_path: Path,
) -> None:
    """A taken port used to print the "REST API ..." line, then uvicorn's own error (exit
    3); a port out of range, a traceback. Both are now an ``error: --port`` and exit 2."""
    data = str(tmp_path / "data")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for argv in (["serve"], ["mcp", "--transport", "http"]):
            out = run(*argv, "--port", port, "--data-dir", data)
            assert out.returncode == 2, out.stderr
            assert out.stderr.startswith(f"error: --port: cannot listen on http://127.0.0.1:{port}")
            assert "REST API" not in out.stderr and "streamable HTTP" not in out.stderr
    for bad in ("99999", "-5"):
        out = run("serve", "--port", bad, "--data-dir", data)
        assert out.returncode == 2 and "--port" in out.stderr and "Traceback" not in out.stderr
    out = run("serve", "--host", "no-such-host.invalid", "--data-dir", data)
    assert out.returncode == 2 and out.stderr.startswith("error: --host: cannot listen on")


def test_serve_reads_its_settings_from_the_environment_where_no_flag_gives_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``lightmem serve`` used to overwrite LIGHTMEM_SERVER_CONFIG and
    LIGHTMEM_MAX_BODY_BYTES with its flags' defaults, so a bad value was never reported and
    a good one never used."""
    data = str(tmp_path / "data")
    port = str(_free_port())
    for name, value, says in (
        ("LIGHTMEM_SERVER_CONFIG", "notjson", "LIGHTMEM_SERVER_CONFIG: not valid JSON"),
        ("LIGHTMEM_SERVER_CONFIG", '{"store": {"path": "a.db"}}', "store: the server keeps"),
        ("LIGHTMEM_MAX_BODY_BYTES", "abc", "LIGHTMEM_MAX_BODY_BYTES: expected a positive"),
    ):
        with monkeypatch.context() as patched:
            patched.setenv(name, value)
            out = run("serve", "--port", port, "--data-dir", data)
        assert out.returncode == 2 and out.stderr.startswith(f"error: {says}"), out.stderr
    # a good limit is the one the server keeps
    key = _key(tmp_path / "data")
    plain = {k: v for k, v in os.environ.items() if not k.startswith("LIGHTMEM_")}
    proc = subprocess.Popen(
        [*CLI, "serve", "--port", port, "--data-dir", data],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**plain, "LIGHTMEM_MAX_BODY_BYTES": "2000"},
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/docs", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        r = httpx.post(
            f"{base}/v1/memories",
            json={"messages": [{"content": "x" * 3000}]},
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
        assert r.status_code == 413, r.text
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_keys_on_a_missing_data_dir_are_refused_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nodir"
    for argv in (["keys", "list"], ["keys", "revoke", "abcd1234"]):
        out = run(*argv, "--data-dir", str(missing))
        assert out.returncode == 2 and "--data-dir: no directory" in out.stderr, out.stderr
        assert not missing.exists()
    assert run("keys", "create", "--tenant", "acme", "--data-dir", str(missing)).returncode == 0
    assert run("keys", "list", "--data-dir", str(missing)).returncode == 0

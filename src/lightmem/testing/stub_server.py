"""An OpenAI-compatible HTTP server on 127.0.0.1 that answers deterministically and counts.

It speaks the real wire protocol, so tests exercise the ``openai`` SDK, timeouts, retries and
JSON handling exactly as against vLLM, Ollama or OpenAI itself.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import numpy as np

from lightmem.text import estimate_tokens, words

__all__ = ["ChatHandler", "OpenAIStubServer", "StubCounters"]

ChatHandler = Callable[[list[dict[str, Any]]], str]


@dataclass
class StubCounters:
    """What the stub has served so far."""

    requests: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: requests spoiled by ``fail_next`` or ``delay_next`` (each counted once)
    injected: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)


class OpenAIStubServer:
    """Serves ``/v1/embeddings`` and ``/v1/chat/completions`` on a free loopback port.

    Embeddings are bag-of-words hashes (texts sharing words get similar vectors). Chat replies
    come from ``chat_handler(messages) -> str``. ``fail_next(status, times)`` makes the next
    requests fail with that HTTP status, for fault tests. ``refuse_formats`` lists
    ``response_format`` types answered with HTTP 400 (an endpoint without structured
    outputs); ``report_usage=False`` leaves ``usage`` out of replies (as some servers do).
    """

    def __init__(
        self,
        *,
        embedding_dim: int = 64,
        chat_handler: ChatHandler | None = None,
        refuse_formats: tuple[str, ...] = (),
        report_usage: bool = True,
    ) -> None:
        self.embedding_dim = embedding_dim
        self.chat_handler = chat_handler or (lambda messages: "{}")
        self.refuse_formats = refuse_formats
        self.report_usage = report_usage
        self.counters = StubCounters()
        self._faults: list[int] = []
        self._delays: list[float] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def fail_next(self, status: int, times: int = 1) -> None:
        """The next ``times`` requests get HTTP ``status`` and an error body."""
        with self._lock:
            self._faults.extend([status] * times)

    def delay_next(self, seconds: float, times: int = 1) -> None:
        """The next ``times`` requests are answered only after ``seconds`` (a slow server)."""
        with self._lock:
            self._delays.extend([seconds] * times)

    def start(self) -> OpenAIStubServer:
        # stop() waits for the serving loop to notice: a short poll keeps that wait short
        # (the default half-second is most of a short test's time).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIStubServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def embed(self, text: str) -> list[float]:
        v = np.zeros(self.embedding_dim)
        for w in words(text.lower()):
            h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
            v[h % self.embedding_dim] += 1.0 if (h >> 32) & 1 else -1.0
        if not v.any():
            v[0] = 1.0
        return [float(x) for x in v]

    # -- request handling -------------------------------------------------------------------
    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.counters.requests[path] = self.counters.requests.get(path, 0) + 1
            self.counters.bodies.append(body)
            fault = self._faults.pop(0) if self._faults else None
            delay = self._delays.pop(0) if self._delays else 0.0
            if fault is not None or delay:
                self.counters.injected += 1
        if delay:
            time.sleep(delay)
        if fault is not None:
            return fault, {"error": {"message": f"injected fault {fault}", "type": "stub"}}
        if path.endswith("/embeddings"):
            inputs = body.get("input")
            texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
            # a start and an end token per input, as a server's tokenizer counts them: the
            # reported usage is not what a client would estimate
            tokens = sum(estimate_tokens(t) + 2 for t in texts)
            with self._lock:
                self.counters.prompt_tokens += tokens
            vectors: dict[str, Any] = {
                "object": "list",
                "model": body.get("model", "stub"),
                "data": [
                    {"object": "embedding", "index": i, "embedding": self.embed(t)}
                    for i, t in enumerate(texts)
                ],
            }
            if self.report_usage:
                vectors["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
            return 200, vectors
        if path.endswith("/chat/completions"):
            messages = body.get("messages", [])
            if not isinstance(messages, list) or len(messages) < 1:
                return 400, {"error": {"message": "messages: required"}}
            fmt = (body.get("response_format") or {}).get("type")
            if fmt in self.refuse_formats:
                return 400, {"error": {"message": f"response_format {fmt!r} is not supported"}}
            try:
                reply = self.chat_handler(messages)
            except Exception as exc:  # a handler that cannot read the request: a 400
                return 400, {"error": {"message": f"stub handler failed: {exc}"}}
            prompt = sum(estimate_tokens(str(m.get("content", ""))) for m in messages)
            completion = estimate_tokens(reply)
            with self._lock:
                self.counters.prompt_tokens += prompt
                self.counters.completion_tokens += completion
            answer: dict[str, Any] = {
                "id": "stub-1",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "stub"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                    }
                ],
            }
            if self.report_usage:
                answer["usage"] = {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                }
            return 200, answer
        return 404, {"error": {"message": f"no route {path}"}}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    status, payload = 400, {"error": {"message": "malformed JSON"}}
                else:
                    status, payload = stub._answer(self.path, body)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler

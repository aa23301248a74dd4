"""Run an ASGI app with uvicorn on a free loopback port in a background thread."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any

__all__ = ["LiveServer"]


class LiveServer:
    """``with LiveServer(app) as base_url: ...`` serves ``app`` on 127.0.0.1 meanwhile."""

    def __init__(self, app: Any, **options: Any) -> None:
        """``options``: more ``uvicorn.Config`` settings (say, the servers' own
        :func:`~lightmem.server.connections.uvicorn_options`)."""
        import uvicorn

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", **options
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        return self.url

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

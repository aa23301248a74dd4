"""One log line per HTTP request: method, path, status and milliseconds.

The query string and the headers are never logged, so neither an API key nor a search
query reaches the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = [
    "ACCESS_LOGGER",
    "MAX_LOGGED_PATH",
    "ASGIApp",
    "AccessLog",
    "Receive",
    "Send",
    "log_config",
    "logged_path",
]

ACCESS_LOGGER = "lightmem.access"

Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


class AccessLog:
    """ASGI middleware logging ``METHOD /path STATUS 12.3ms`` to :data:`ACCESS_LOGGER`."""

    def __init__(self, app: ASGIApp, logger: logging.Logger | None = None) -> None:
        self.app = app
        self.log = logger or logging.getLogger(ACCESS_LOGGER)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # what the client sees if the app fails before answering

        async def send_status(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            ms = (time.perf_counter() - start) * 1000
            self.log.info("%s %s %d %.1fms", scope["method"], logged_path(scope), status, ms)


#: Characters of a request path written to the access log.
MAX_LOGGED_PATH = 200


def logged_path(scope: MutableMapping[str, Any]) -> str:
    """The request path as it came on the wire (still percent-encoded: a ``%0A`` in it
    cannot start a forged log line, nor ``%1B`` reach the operator's terminal), any byte
    outside printable ASCII escaped, cut to :data:`MAX_LOGGED_PATH` characters."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else str(scope.get("path", ""))
    safe = "".join(c if " " < c < "\x7f" else f"%{ord(c):02X}" for c in path)
    return safe if len(safe) <= MAX_LOGGED_PATH else safe[:MAX_LOGGED_PATH] + "..."


def log_config(access: bool) -> dict[str, Any]:
    """The ``logging.config.dictConfig`` for the servers (uvicorn applies it in every worker):
    uvicorn's own warnings and errors, and the access lines unless ``access`` is off."""
    handler = {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stderr"}
    quiet = {"handlers": ["stderr"], "level": "WARNING", "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(message)s", "datefmt": "%H:%M:%S"}},
        "handlers": {"stderr": handler},
        "loggers": {
            "uvicorn": quiet,
            "uvicorn.error": quiet,
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            ACCESS_LOGGER: {
                "handlers": ["stderr"],
                "level": "INFO" if access else "WARNING",
                "propagate": False,
            },
        },
    }

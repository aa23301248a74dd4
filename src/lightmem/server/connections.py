"""How the HTTP servers (``lightmem serve``, ``lightmem mcp --transport http``) hold
connections: a client must send its request's headers within :data:`HEADER_DEADLINE_S`
of connecting, and a worker serves at most :data:`MAX_CONNECTIONS` connections at once
(503 past it). uvicorn has neither by itself: a connection sending one header line every
few seconds stayed open for minutes, and 42,000 of them, sent without any key, used up
both workers' file descriptors so that no client was served.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_DEADLINE_S", "MAX_CONNECTIONS", "HeaderDeadline", "uvicorn_options"]

HEADER_DEADLINE_S = 10.0
MAX_CONNECTIONS = 1_000
#: An idle kept-alive connection is closed after this long (uvicorn's default).
KEEP_ALIVE_S = 5


class HeaderDeadline(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection whose first request's headers
    have not all arrived ``header_deadline_s`` after it was opened. (Later requests of a
    kept-alive connection are uvicorn's: it closes one idle for :data:`KEEP_ALIVE_S`.)"""

    header_deadline_s = HEADER_DEADLINE_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline = self.loop.call_later(self.header_deadline_s, self._headers_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline.cancel()
        super().connection_lost(exc)

    def _headers_late(self) -> None:
        if self.cycle is None and not self.transport.is_closing():
            self.transport.close()  # no request began: a slow or idle client lets go


def uvicorn_options() -> dict[str, Any]:
    """The connection settings both servers give ``uvicorn.run``."""
    return {
        "http": HeaderDeadline,
        "limit_concurrency": MAX_CONNECTIONS,
        "timeout_keep_alive": KEEP_ALIVE_S,
    }

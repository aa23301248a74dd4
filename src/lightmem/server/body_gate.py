"""The gate every HTTP request passes before its app (REST, or MCP over HTTP) sees it: the
key is checked before a byte of body is read, the body is read within a size limit and a
deadline, then handed on whole."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import anyio
import anyio.to_thread

from lightmem.errors import (
    BackendError,
    ConfigError,
    InvalidInputError,
    LightMemError,
    NotFoundError,
    StoreError,
)
from lightmem.server.access_log import ASGIApp, Receive, Send
from lightmem.server.service import public_error
from lightmem.server.tenancy import KeyRegistry

__all__ = [
    "BODY_DEADLINE_S",
    "CHALLENGE",
    "STATUS",
    "TENANT_STATE",
    "UNAUTHORIZED",
    "BodyGate",
    "api_key",
    "checked_deadline",
    "error_body",
    "http_status",
]

#: Seconds a client has to send a request's whole body: a stalled upload would hold its
#: buffer (up to the body limit) and a connection for as long as it stayed open.
BODY_DEADLINE_S = 30.0
UNAUTHORIZED = "a valid API key is required"
CHALLENGE = {"WWW-Authenticate": "Bearer"}
#: Where the gate leaves the tenant of the key it checked, in the request's ASGI state.
TENANT_STATE = "lightmem_tenant"


#: The HTTP status of each kind of lightmem error (the first that matches; 400 for others).
STATUS: tuple[tuple[type[LightMemError], int], ...] = (
    (NotFoundError, 404),
    (InvalidInputError, 422),
    (ConfigError, 400),
    (BackendError, 502),
    (StoreError, 503),
)


def error_body(kind: str, message: str) -> dict[str, dict[str, str]]:
    """The JSON of every error answer: ``{"error": {"type", "message"}}``."""
    return {"error": {"type": kind, "message": message}}


def http_status(exc: LightMemError) -> int:
    """The status a REST answer or the gate gives ``exc``."""
    return next((code for cls, code in STATUS if isinstance(exc, cls)), 400)


def checked_deadline(seconds: float) -> float:
    """``seconds`` if it is a positive number of seconds, else a ConfigError."""
    if not seconds > 0:  # NaN too
        raise ConfigError(f"body_deadline_s: expected a positive number, got {seconds}")
    return seconds


def api_key(authorization: str | None, x_api_key: str | None) -> str | None:
    """The key a request presents: ``Authorization: Bearer <key>``, else ``X-API-Key``."""
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return x_api_key


class BodyGate:
    """A request with a body needs a valid key, checked before any of the body is read (401:
    nothing is buffered for a caller without one, on any path; the tenant found is left in
    the request's state under :data:`TENANT_STATE`); then 413 for a body over ``max_bytes``,
    by Content-Length or while streaming, and 408 for one not sent within ``deadline_s``."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        keys: KeyRegistry,
        deadline_s: float = BODY_DEADLINE_S,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.keys = keys
        self.deadline_s = checked_deadline(deadline_s)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        if not chunked and (declared is None or declared.strip() in (b"", b"0")):
            await self.app(scope, receive, send)  # no body: nothing to read or hold
            return
        # A body is read for a valid key only, whatever the path.
        key = api_key(_header(headers, b"authorization"), _header(headers, b"x-api-key"))
        try:
            tenant = await anyio.to_thread.run_sync(self.keys.tenant_for, key)
        except LightMemError as exc:  # the key store failed: the server's fault, answered so
            kind, message = public_error(exc)
            await _send_error(send, http_status(exc), kind, message)
            return
        if tenant is None:
            await _send_error(send, 401, "Unauthorized", UNAUTHORIZED, CHALLENGE)
            return
        scope.setdefault("state", {})[TENANT_STATE] = tenant  # the app need not look it up again
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _send_413(send, self.max_bytes)
            return
        # Read the body first (at most max_bytes of it), then replay it to the app, so an
        # oversize chunked body is refused before any handler sees a byte of it.
        body = bytearray()
        try:
            with anyio.fail_after(self.deadline_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        await self.app(scope, receive, send)  # disconnect: let the app see it
                        return
                    body += message.get("body", b"")
                    if len(body) > self.max_bytes:
                        await _send_413(send, self.max_bytes)
                        return
                    if not message.get("more_body"):
                        break
        except TimeoutError:
            message = f"body: not received within {self.deadline_s:g} s"
            await _send_error(send, 408, "RequestTimeout", message)
            return
        delivered = False

        async def replay() -> Any:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _header(headers: Mapping[bytes, bytes], name: bytes) -> str | None:
    value = headers.get(name)
    return None if value is None else value.decode("latin-1")


async def _send_413(send: Callable[[Any], Awaitable[None]], limit: int) -> None:
    await _send_error(send, 413, "PayloadTooLarge", f"body: larger than {limit} bytes")


async def _send_error(
    send: Callable[[Any], Awaitable[None]],
    status: int,
    kind: str,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    """The ``{"error": {"type", "message"}}`` answer, sent before the app runs."""
    body = json.dumps(error_body(kind, message)).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})

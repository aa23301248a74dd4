"""The gate every HTTP request passes before its app (REST, or MCP over HTTP) sees it: the
key is checked before a byte of body is read, the body is read within a size limit and a
deadline, then handed on whole."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from types import MappingProxyType
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
    StoreFullError,
)
from lightmem.server.access_log import ASGIApp, Receive, Send
from lightmem.server.in_flight import InFlight, busy
from lightmem.server.service import public_error
from lightmem.server.tenancy import KeyRegistry

__all__ = [
    "BODY_DEADLINE_S",
    "CHALLENGE",
    "MAX_READING",
    "STATUS",
    "TENANT_STATE",
    "UNAUTHORIZED",
    "BodyGate",
    "TenantInFlight",
    "api_key",
    "checked_deadline",
    "error_body",
    "http_status",
]

#: Seconds a client has to send a request's whole body: a stalled upload would hold its
#: buffer (up to the body limit) and a connection for as long as it stayed open.
BODY_DEADLINE_S = 30.0
UNAUTHORIZED = "a valid API key is required"
CHALLENGE: Mapping[str, str] = MappingProxyType({"WWW-Authenticate": "Bearer"})
#: Where the gate leaves the tenant of the key it checked, in the request's ASGI state.
TENANT_STATE = "lightmem_tenant"
#: Bodies one tenant may have being read at once, per worker (see :class:`BodyGate`).
MAX_READING = 8


#: The HTTP status of each kind of lightmem error (the first that matches; 400 for others).
STATUS: tuple[tuple[type[LightMemError], int], ...] = (
    (NotFoundError, 404),
    (InvalidInputError, 422),
    (ConfigError, 400),
    (BackendError, 502),
    (StoreFullError, 507),  # the tenant's size limit: purging makes room, retrying does not
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
    by Content-Length or while streaming, and 408 for one not sent within ``deadline_s``.
    A tenant has at most ``max_reading`` bodies being read at once (429 past it): 100 slow
    uploads of 8 MB with one key held 1 GB of buffers before any limit on the requests
    served applied."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        keys: KeyRegistry,
        deadline_s: float = BODY_DEADLINE_S,
        max_reading: int = MAX_READING,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.keys = keys
        self.deadline_s = checked_deadline(deadline_s)
        self.reading = InFlight(max_reading, "max_reading")

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
            await send_error(send, http_status(exc), kind, message)
            return
        if tenant is None:
            await send_error(send, 401, "Unauthorized", UNAUTHORIZED, CHALLENGE)
            return
        scope.setdefault("state", {})[TENANT_STATE] = tenant  # the app need not look it up again
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _send_413(send, self.max_bytes)
            return
        if not self.reading.enter(tenant):
            message = f"tenant: {self.reading.limit} bodies already being read; retry"
            await send_error(send, 429, "TooManyRequests", message, {"Retry-After": "1"})
            return
        try:
            body = await self._read(scope, receive, send)
        finally:
            self.reading.leave(tenant)
        if body is None:
            return  # answered already (413, 408) or passed on (a disconnect)
        delivered = False

        async def replay() -> Any:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read(
        self, scope: MutableMapping[str, Any], receive: Receive, send: Send
    ) -> bytearray | None:
        """The whole body (at most max_bytes of it, within the deadline), or None once
        answered: read first and replayed to the app, so an oversize chunked body is
        refused before any handler sees a byte of it."""
        body = bytearray()
        try:
            with anyio.fail_after(self.deadline_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        await self.app(scope, receive, send)  # disconnect: let the app see it
                        return None
                    body += message.get("body", b"")
                    if len(body) > self.max_bytes:
                        await _send_413(send, self.max_bytes)
                        return None
                    if not message.get("more_body"):
                        return body
        except TimeoutError:
            late = f"body: not received within {self.deadline_s:g} s"
            await send_error(send, 408, "RequestTimeout", late)
            return None


def _header(headers: Mapping[bytes, bytes], name: bytes) -> str | None:
    value = headers.get(name)
    return None if value is None else value.decode("latin-1")


async def _send_413(send: Callable[[Any], Awaitable[None]], limit: int) -> None:
    await send_error(send, 413, "PayloadTooLarge", f"body: larger than {limit} bytes")


async def send_error(
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


class TenantInFlight:
    """At most ``in_flight.limit`` requests of one tenant served at a time (429 with
    ``Retry-After: 1`` past it), as the REST API's dependency does: MCP over HTTP had no
    such limit, and one tenant's 60 concurrent adds made another's ``stats`` take 31 s. The
    tenant is the one the body gate found for the key; a request without a body (a
    notification stream) is not counted. The slot is given back as the answer's last part
    is sent, so a client sending its next request on reading an answer is not refused."""

    def __init__(self, app: ASGIApp, in_flight: InFlight) -> None:
        self.app = app
        self.in_flight = in_flight

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        tenant = scope.get("state", {}).get(TENANT_STATE) if scope["type"] == "http" else None
        if tenant is None:
            await self.app(scope, receive, send)
            return
        if not self.in_flight.enter(tenant):
            limit = self.in_flight.limit
            await send_error(send, 429, "TooManyRequests", busy(limit), {"Retry-After": "1"})
            return
        held = True

        async def sending(message: Any) -> None:
            nonlocal held
            last = message["type"] == "http.response.body" and not message.get("more_body")
            if last and held:
                held = False
                self.in_flight.leave(tenant)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if held:
                self.in_flight.leave(tenant)

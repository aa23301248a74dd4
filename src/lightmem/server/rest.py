"""The REST API (FastAPI, ASGI) with the memory viewer at ``/ui``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from http import HTTPStatus
from importlib import resources
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from swagger_ui_bundle import swagger_ui_path

from lightmem.errors import (
    InvalidInputError,
    LightMemError,
)
from lightmem.pipeline.update import MAX_KEEP_TOP_N, MAX_TOP_K
from lightmem.server import schemas, service
from lightmem.server.access_log import AccessLog
from lightmem.server.body_gate import (
    BODY_DEADLINE_S,
    CHALLENGE,
    TENANT_STATE,
    UNAUTHORIZED,
    BodyGate,
    api_key,
    checked_deadline,
    error_body,
    http_status,
)
from lightmem.server.env import (
    DEFAULT_MAX_BODY,
    MAX_BODY_VAR,
    SERVER_CONFIG_VAR,
    bytes_from_env,
    config_from_env,
    tenant_max_mb_from_env,
)
from lightmem.server.in_flight import MAX_IN_FLIGHT, InFlight, busy
from lightmem.server.schemas import Kind, MemoryFilters, Mode, RetrievalScope, StepFeedbackArg
from lightmem.server.tenancy import (
    SERVER_SCHEMA,
    KeyRegistry,
    Tenant,
    TenantPool,
    single_threaded_blas,
)
from lightmem.validate import MAX_OFFSET

__all__ = [
    "DEFAULT_MAX_BODY",
    "MAX_IN_FLIGHT",
    "AddBody",
    "KnowledgeBody",
    "OfflineUpdateBody",
    "RestoreBody",
    "Scope",
    "ScopeDep",
    "ScopeFields",
    "SearchBody",
    "StepBody",
    "SummarizeBody",
    "TaskBody",
    "TenantDep",
    "UpdateBody",
    "app_from_env",
    "create_app",
]

Scope = dict[str, str | None]


class _Body(BaseModel):
    # strict: "yes" is no boolean and "3" no integer, as in the library and the MCP tools
    model_config = ConfigDict(extra="forbid", strict=True)


class ScopeFields(_Body):
    user_id: str | None = Field(None, description=schemas.USER_ID)
    agent_id: str | None = Field(None, description=schemas.AGENT_ID)
    run_id: str | None = Field(None, description=schemas.RUN_ID)


class AddBody(ScopeFields):
    messages: list[dict[str, Any]] | dict[str, Any] = Field(description=schemas.MESSAGES)
    force_segment: bool = False
    force_extract: bool = False


class SearchBody(ScopeFields):
    query: str = Field(description=schemas.QUERY)
    limit: int | None = Field(None, description=schemas.LIMIT)
    filters: MemoryFilters | None = Field(None, description=schemas.FILTERS)
    mode: Mode | None = Field(None, description=schemas.MODE)
    budget_tokens: int | None = Field(None, description=schemas.BUDGET_TOKENS)
    all_scopes: bool = Field(False, description=schemas.ALL_SCOPES)
    as_of: str | None = Field(None, description=schemas.AS_OF)


class UpdateBody(ScopeFields):
    text: str


class RestoreBody(ScopeFields):
    version: int | None = None


class OfflineUpdateBody(ScopeFields):
    top_k: int = Field(20, ge=1, le=MAX_TOP_K)
    keep_top_n: int = Field(10, ge=1, le=MAX_KEEP_TOP_N)
    score_threshold: float = Field(0.8, ge=-1.0, le=1.0, allow_inf_nan=False)
    recheck: bool = Field(False, strict=True, description=schemas.RECHECK)


class SummarizeBody(ScopeFields):
    time_window: str | float = Field("7d", description=schemas.TIME_WINDOW)
    retrieval_scope: RetrievalScope = Field("global", description=schemas.RETRIEVAL_SCOPE)


class KnowledgeBody(_Body):
    docs: str | list[str] | list[dict[str, str]]
    source: str = ""


class TaskBody(_Body):
    task: str
    max_rounds: int | None = None


class StepBody(_Body):
    result: Any = None
    success: bool
    feedback: StepFeedbackArg = Field(None, description=schemas.FEEDBACK)
    actions: list[str] = Field(default_factory=list)
    step: int | None = Field(None, ge=0, description=schemas.STEP)


def _scope_of(body: ScopeFields) -> Scope:
    return {"user_id": body.user_id, "agent_id": body.agent_id, "run_id": body.run_id}


def create_app(
    pool: TenantPool,
    keys: KeyRegistry,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    body_deadline_s: float = BODY_DEADLINE_S,
    max_in_flight: int = MAX_IN_FLIGHT,
) -> FastAPI:
    """The ASGI app: every ``/v1`` route needs ``Authorization: Bearer <key>`` (or
    ``X-API-Key``); the key selects the tenant and nothing outside it is reachable. A body
    is read only for a valid key, up to ``max_body_bytes``, within ``body_deadline_s``; a
    tenant with ``max_in_flight`` requests being served gets 429 for more."""
    checked_deadline(body_deadline_s)  # now: the middleware is built at the first request
    app = FastAPI(
        title="lightmem",
        version="0.1.0",
        description="Long-term memory for LLM agents (LightMem + FluxMem).",
        dependencies=[Depends(_known_query)],
        docs_url=None,  # served below from the package's files, not a CDN
        redoc_url=None,
    )

    app.state.pool = pool
    app.state.keys = keys
    app.state.in_flight = InFlight(max_in_flight)

    @app.exception_handler(_Unauthorized)
    async def unauthorized(_: Request, __: Exception) -> JSONResponse:
        return _error(401, "Unauthorized", UNAUTHORIZED, dict(CHALLENGE))

    @app.exception_handler(_Busy)
    async def at_limit(_: Request, __: Exception) -> JSONResponse:
        return _error(429, "TooManyRequests", busy(max_in_flight), {"Retry-After": "1"})

    @app.exception_handler(LightMemError)
    async def lightmem_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, LightMemError)
        return _error(http_status(exc), *service.public_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        # Starlette's own answers (unknown route, wrong method, a body it cannot parse) in
        # the documented shape; a body that is not JSON is invalid input, as elsewhere.
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:
            return _error(422, "InvalidInputError", f"body: {exc.detail}")
        kind = HTTPStatus(exc.status_code).phrase.replace(" ", "")
        return _error(exc.status_code, kind, str(exc.detail), dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        if first.get("type") == "json_invalid":
            return _error(422, "InvalidInputError", f"body: malformed JSON ({first.get('msg')})")
        field = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        return _error(422, "InvalidInputError", f"{field}: {first.get('msg', 'invalid')}")

    # -- LightMem -----------------------------------------------------------------------
    @app.post("/v1/memories", tags=["memory"])
    def add_memory(body: AddBody, t: TenantDep) -> dict[str, Any]:
        return service.add_memory(
            t,
            body.messages,
            scope=_scope_of(body),
            force_segment=body.force_segment,
            force_extract=body.force_extract,
        )

    @app.post("/v1/flush", tags=["memory"])
    def flush(t: TenantDep, body: ScopeFields | None = None) -> dict[str, Any]:
        """Extract the turns still buffered in the body's scope (every scope when it names
        none; the body may be left out), as ``force_extract`` does on an add: their
        provisional ``p-`` entries are replaced by extracted ones, which can be edited.
        Returns ``segments_created`` and ``entries_created``."""
        return service.flush(t, _scope_of(body) if body is not None else None)

    @app.post("/v1/memories/search", tags=["memory"])
    def search(body: SearchBody, t: TenantDep) -> dict[str, Any]:
        return service.retrieve(
            t,
            body.query,
            limit=body.limit,
            filters=body.filters.as_dict() if body.filters else None,
            mode=body.mode,
            budget_tokens=body.budget_tokens,
            scope=_scope_of(body),
            all_scopes=body.all_scopes,
            as_of=body.as_of,
        )

    @app.get("/v1/memories", tags=["memory"])
    def list_memories(
        t: TenantDep,
        scope: ScopeDep,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
        kind: Kind | None = None,
        speaker: str | None = None,
        all_scopes: Annotated[bool, Query(description=schemas.ALL_SCOPES)] = False,
    ) -> dict[str, Any]:
        filters = {k: v for k, v in (("kind", kind), ("speaker", speaker)) if v is not None}
        return service.list_memories(
            t,
            filters=filters or None,
            limit=limit,
            offset=offset,
            scope=scope,
            all_scopes=all_scopes,
        )

    @app.get("/v1/memories/{entry_id}", tags=["memory"])
    def get_memory(entry_id: str, t: TenantDep, scope: ScopeDep) -> dict[str, Any]:
        return service.get_memory(t, entry_id, scope)

    @app.patch("/v1/memories/{entry_id}", tags=["memory"])
    def update_memory(entry_id: str, body: UpdateBody, t: TenantDep) -> dict[str, Any]:
        return service.update_memory(t, entry_id, body.text, _scope_of(body))

    @app.delete("/v1/memories/{entry_id}", tags=["memory"])
    def delete_memory(entry_id: str, t: TenantDep, scope: ScopeDep) -> dict[str, Any]:
        return service.delete_memory(t, entry_id, scope)

    @app.delete("/v1/purge", tags=["memory"])
    def purge(t: TenantDep, scope: ScopeDep, entry_id: str | None = None) -> dict[str, Any]:
        """Erase one memory (``entry_id``) or everything in a scope for good: entries,
        history, source turns, vectors and (for a scope) its FluxMem graph; not restorable.
        Neither an id nor a scope field: 422. Returns the rows removed per table."""
        return service.purge(t, entry_id, scope)

    @app.get("/v1/memories/{entry_id}/history", tags=["memory"])
    def history(entry_id: str, t: TenantDep, scope: ScopeDep) -> dict[str, Any]:
        return service.memory_history(t, entry_id, scope)

    @app.post("/v1/memories/{entry_id}/restore", tags=["memory"])
    def restore(entry_id: str, body: RestoreBody, t: TenantDep) -> dict[str, Any]:
        return service.restore_memory(t, entry_id, body.version, _scope_of(body))

    @app.post("/v1/update", tags=["memory"])
    def offline_update(body: OfflineUpdateBody, t: TenantDep) -> dict[str, Any]:
        return service.offline_update(
            t,
            top_k=body.top_k,
            keep_top_n=body.keep_top_n,
            score_threshold=body.score_threshold,
            scope=_scope_of(body),
            recheck=body.recheck,
        )

    @app.post("/v1/summarize", tags=["memory"])
    def summarize(body: SummarizeBody, t: TenantDep) -> dict[str, Any]:
        return service.summarize(
            t,
            time_window=body.time_window,
            retrieval_scope=body.retrieval_scope,
            scope=_scope_of(body),
        )

    @app.get("/v1/stats", tags=["memory"])
    def stats(t: TenantDep, scope: ScopeDep) -> dict[str, Any]:
        return service.stats(t, scope)

    # -- FluxMem ------------------------------------------------------------------------
    @app.post("/v1/fluxmem/knowledge", tags=["fluxmem"])
    def add_knowledge(body: KnowledgeBody, t: TenantDep) -> dict[str, Any]:
        return service.add_knowledge(t, body.docs, body.source)

    @app.post("/v1/fluxmem/tasks", tags=["fluxmem"])
    def start_task(body: TaskBody, t: TenantDep) -> dict[str, Any]:
        return service.start_task(t, body.task, body.max_rounds)

    @app.post("/v1/fluxmem/tasks/{session_id}/steps", tags=["fluxmem"])
    def record_step(session_id: str, body: StepBody, t: TenantDep) -> dict[str, Any]:
        return service.record_step(
            t,
            session_id,
            result=body.result,
            success=body.success,
            feedback=body.feedback,
            actions=body.actions,
            step=body.step,
        )

    @app.delete("/v1/fluxmem/graph", tags=["fluxmem"])
    def purge_graph(
        t: TenantDep,
        node_id: Annotated[str | None, Query(description=schemas.NODE_ID)] = None,
    ) -> dict[str, Any]:
        """Erase the tenant's whole FluxMem graph, or only node ``node_id`` (its edges,
        history, the history events and task sessions holding it), for good (not
        restorable). An unknown ``node_id``: 404. Returns the rows removed per table."""
        return service.purge_graph(t, node_id)

    @app.post("/v1/fluxmem/consolidate", tags=["fluxmem"])
    def consolidate(t: TenantDep) -> dict[str, Any]:
        return service.consolidate(t)

    @app.get("/v1/fluxmem/subgraph", tags=["fluxmem"])
    def subgraph(task: str, t: TenantDep) -> dict[str, Any]:
        return service.show_subgraph(t, task)

    @app.get("/v1/fluxmem/graph", tags=["fluxmem"])
    def graph(t: TenantDep, limit: Annotated[int, Query(ge=1, le=5000)] = 500) -> dict[str, Any]:
        return service.graph(t, limit)

    @app.get("/v1/fluxmem/history", tags=["fluxmem"])
    def graph_history(
        t: TenantDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> dict[str, Any]:
        return service.graph_history(t, limit)

    # -- viewer and API docs (every file served from the installed packages: offline) ---
    ui_dir = resources.files("lightmem.server") / "ui"
    app.mount("/ui", StaticFiles(directory=str(ui_dir), html=True), name="ui")
    app.mount("/docs/assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url="/docs/assets/swagger-ui-bundle.js",
            swagger_css_url="/docs/assets/swagger-ui.css",
            swagger_favicon_url="/docs/assets/favicon-32x32.png",
        )

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/")

    app.add_middleware(BodyGate, max_bytes=max_body_bytes, keys=keys, deadline_s=body_deadline_s)
    app.add_middleware(AccessLog)  # outermost: 413s and 401s are logged too
    return app


class _Unauthorized(Exception):
    pass


class _Busy(Exception):
    pass


def _tenant(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Iterator[Tenant]:
    """The caller's tenant, from ``Authorization: Bearer <key>`` or ``X-API-Key``, counted
    against its requests in flight while the request is served."""
    name = getattr(request.state, TENANT_STATE, None) or request.app.state.keys.tenant_for(
        api_key(authorization, x_api_key)
    )
    if name is None:
        raise _Unauthorized()
    gate: InFlight = request.app.state.in_flight
    if not gate.enter(name):
        raise _Busy()
    try:
        tenant: Tenant = request.app.state.pool.get(name)
        yield tenant
    finally:
        gate.leave(name)


# "function": the slot is given back before the answer is sent, so a client that sends its
# next request on reading an answer is never refused for the one it just had answered.
TenantDep = Annotated[Tenant, Depends(_tenant, scope="function")]


def _known_query(request: Request) -> None:
    """Refuse a query parameter the route does not take, naming it: ignored, a misspelt
    ``entry_id`` on ``DELETE /v1/purge`` would erase the whole user instead of one entry."""
    route = request.scope.get("route")
    path = getattr(route, "path", None)
    if path is None:
        return
    taken = _query_names(request.app).get((path, request.method.lower()))
    if taken is None:
        return  # a route outside the schema (the redirect to the viewer)
    unknown = sorted(set(request.query_params) - taken)
    if unknown:
        allowed = ", ".join(sorted(taken)) or "none"
        raise InvalidInputError(
            f"{unknown[0]}: unknown query parameter (this route takes: {allowed})"
        )


def _query_names(app: FastAPI) -> dict[tuple[str, str], frozenset[str]]:
    """Each route's (path, method) with the query parameters it declares, read once from
    the app's OpenAPI schema."""
    names: dict[tuple[str, str], frozenset[str]] | None = getattr(app.state, "query_names", None)
    if names is None:
        names = {
            (path, method): frozenset(
                p["name"] for p in op.get("parameters", ()) if p.get("in") == "query"
            )
            for path, ops in app.openapi().get("paths", {}).items()
            for method, op in ops.items()
        }
        app.state.query_names = names
    return names


def _query_scope(
    user_id: Annotated[str | None, Query(description=schemas.USER_ID)] = None,
    agent_id: Annotated[str | None, Query(description=schemas.AGENT_ID)] = None,
    run_id: Annotated[str | None, Query(description=schemas.RUN_ID)] = None,
) -> Scope:
    """The scope of a GET or DELETE, from its query string."""
    return {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}


ScopeDep = Annotated[Scope, Depends(_query_scope)]


def _error(
    status: int, kind: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(kind, message), status, headers=headers)


def app_from_env() -> FastAPI:
    """The app built from ``LIGHTMEM_DATA_DIR`` or ``LIGHTMEM_SERVER_DSN`` (PostgreSQL, keys
    in schema ``LIGHTMEM_SERVER_SCHEMA``, default ``lightmem_server``), and optional
    ``LIGHTMEM_MAX_BODY_BYTES``, ``LIGHTMEM_TENANT_MAX_MB`` (each tenant store's size
    limit) and ``LIGHTMEM_SERVER_CONFIG`` (a JSON object), for
    ``uvicorn --factory`` and multi-worker serving. A value that cannot be read is a
    ``ConfigError`` naming its variable. Serving, the process uses one BLAS thread
    (:func:`~lightmem.server.tenancy.single_threaded_blas`)."""
    dsn = os.environ.get("LIGHTMEM_SERVER_DSN") or None
    data_dir = None if dsn else os.environ.get("LIGHTMEM_DATA_DIR", "lightmem-data")
    config = config_from_env(SERVER_CONFIG_VAR)
    max_body = bytes_from_env(MAX_BODY_VAR, DEFAULT_MAX_BODY)
    max_mb = tenant_max_mb_from_env()
    schema = os.environ.get("LIGHTMEM_SERVER_SCHEMA") or SERVER_SCHEMA
    single_threaded_blas()
    pool = TenantPool(data_dir, config, dsn=dsn, server_schema=schema, tenant_max_mb=max_mb)
    return create_app(pool, pool.keys(), max_body_bytes=max_body)

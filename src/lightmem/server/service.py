"""The operations the REST API and the MCP server both expose, written once.

Every function takes the caller's :class:`Tenant` (resolved from its API key) and returns
plain JSON-able data; validation errors are the library's own ``LightMemError``s.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from lightmem import validate
from lightmem.errors import (
    BackendError,
    InvalidInputError,
    LightMemError,
    StoreError,
    StoreFullError,
)
from lightmem.fluxmem.serialize import serialize
from lightmem.fluxmem.session import TaskSession
from lightmem.fluxmem.types import (
    FAILURE_KINDS,
    FEEDBACK_FIELDS,
    Feedback,
    ScoredNode,
    StepResult,
)
from lightmem.sanitize import check_value
from lightmem.server.tenancy import Tenant
from lightmem.types import MemoryEntry

__all__ = [
    "MAX_PAGE_CHARS",
    "MAX_STEP_ITEMS",
    "UPDATE_SECONDS",
    "add_knowledge",
    "add_memory",
    "as_of_time",
    "consolidate",
    "delete_memory",
    "flush",
    "get_memory",
    "graph",
    "graph_history",
    "list_memories",
    "memory_history",
    "offline_update",
    "public_error",
    "purge",
    "purge_graph",
    "record_step",
    "restore_memory",
    "retrieve",
    "show_subgraph",
    "start_task",
    "stats",
    "summarize",
    "update_memory",
]


def _scope(scope: Mapping[str, Any] | None) -> dict[str, Any]:
    scope = scope or {}
    unknown = set(scope) - {"user_id", "agent_id", "run_id"}
    if unknown:
        raise InvalidInputError(f"scope.{sorted(unknown)[0]}: unknown scope field")
    return {k: scope.get(k) for k in ("user_id", "agent_id", "run_id")}


def as_of_time(value: str | None) -> datetime | None:
    """``as_of`` as sent to REST or MCP: an ISO 8601 date or date-time (``2023-06-12``,
    ``2023-06-12T10:00:00Z``); a date that is not on the calendar (30 February, month 13,
    hour 24) is refused, never moved to a neighbouring day."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise InvalidInputError(
            f"as_of: expected an ISO 8601 date or date-time such as '2023-06-12' or "
            f"'2023-06-12T10:00:00Z', got {value!r} ({exc})"
        ) from exc


def add_memory(
    t: Tenant,
    messages: Any,
    *,
    scope: Mapping[str, Any] | None = None,
    force_segment: bool = False,
    force_extract: bool = False,
) -> dict[str, Any]:
    result = t.memory.add_memory(
        messages, force_segment=force_segment, force_extract=force_extract, **_scope(scope)
    )
    return result.to_dict()


def flush(t: Tenant, scope: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Extract every turn still buffered in the scope (in every scope of the tenant when
    none is given): their provisional entries give way to extracted ones, which can be
    edited. Returns the segments and the entries created."""
    result = t.memory.flush(**_scope(scope))
    return {
        "segments_created": result.segments_created,
        "entries_created": list(result.entries_created),
    }


#: The characters of memory text one answer holds at most, a listing page or a search's
#: results (their entries' text, original text and context; at least one entry whatever
#: its size): 1,000 entries whose fields hold up to 1,000,000 characters each made a 66 MB
#: answer, all in memory at once.
MAX_PAGE_CHARS = 8_000_000


def retrieve(
    t: Tenant,
    query: str,
    *,
    limit: int | None = None,
    filters: Mapping[str, Any] | None = None,
    mode: str | None = None,
    budget_tokens: int | None = None,
    scope: Mapping[str, Any] | None = None,
    all_scopes: bool = False,
    as_of: str | None = None,
    max_chars: int = MAX_PAGE_CHARS,
) -> dict[str, Any]:
    """``all_scopes``: search every user of a store holding several (see
    :mod:`lightmem.memory.scoping`); otherwise such a store needs ``scope.user_id``.
    ``as_of`` (ISO 8601, see :func:`as_of_time`): only what was valid then. The results
    end once their memories' text (stored, original and context) would pass
    ``max_chars``; ``truncated``: more were ranked within ``limit`` (a narrower query or
    filters leave fewer)."""
    results = t.memory.retrieve(
        query,
        limit,
        filters,
        mode=mode,
        budget_tokens=budget_tokens,
        as_of=as_of_time(as_of),
        all_scopes=all_scopes,
        max_chars=max_chars,
        **_scope(scope),
    )
    return {
        "results": [r.to_dict() for r in results],
        "context": t.memory.format_context(results),
        "truncated": results.truncated,
    }


def get_memory(t: Tenant, entry_id: str, scope: Mapping[str, Any] | None = None) -> dict[str, Any]:
    sc = _scope(scope)
    entry = t.memory.get(entry_id, **sc)
    sources = [
        {
            "id": m.id,
            "role": m.role,
            "speaker": m.speaker,
            "content": m.content,
            "timestamp": m.timestamp.isoformat() if m.timestamp else None,
        }
        for m in t.memory.sources(entry_id, **sc)
    ]
    return {**entry.to_dict(), "sources": sources}


_PAGE_CHUNK = 50  # entries read at a time while a page is filled


def list_memories(
    t: Tenant,
    *,
    filters: Mapping[str, Any] | None = None,
    limit: int = 50,
    offset: int = 0,
    scope: Mapping[str, Any] | None = None,
    all_scopes: bool = False,
    max_chars: int = MAX_PAGE_CHARS,
) -> dict[str, Any]:
    """A page of at most ``limit`` entries from ``offset``, ended early when their text
    would pass ``max_chars``; ``next_offset`` is where the next page starts (None: none)."""

    def read(at: int, n: int) -> list[MemoryEntry]:
        return t.memory.list_entries(
            filters, limit=n, offset=at, all_scopes=all_scopes, **_scope(scope)
        )

    page: list[MemoryEntry] = []
    size = 0
    while len(page) < limit:
        want = min(_PAGE_CHUNK, limit - len(page))
        got = read(offset + len(page), want + 1)
        for e in got[:want]:
            if page and size + e.chars > max_chars:
                return _page(page, limit, offset, offset + len(page))
            page.append(e)
            size += e.chars
        if len(got) <= want:
            return _page(page, limit, offset, None)
    return _page(page, limit, offset, offset + limit)


def _page(
    page: Sequence[MemoryEntry], limit: int, offset: int, next_offset: int | None
) -> dict[str, Any]:
    return {
        "items": [e.to_dict() for e in page],
        "limit": limit,
        "offset": offset,
        "next_offset": next_offset,
    }


def update_memory(
    t: Tenant, entry_id: str, text: str, scope: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return t.memory.update(entry_id, text, **_scope(scope)).to_dict()


def delete_memory(
    t: Tenant, entry_id: str, scope: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {"deleted": t.memory.delete(entry_id, **_scope(scope)).id}


def purge(
    t: Tenant, entry_id: str | None = None, scope: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Erase one memory or a whole scope for good (see :meth:`LightMemory.purge`)."""
    return t.memory.purge(entry_id, **_scope(scope)).to_dict()


def memory_history(
    t: Tenant, entry_id: str, scope: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {"events": [e.to_dict() for e in t.memory.history(entry_id, **_scope(scope))]}


def restore_memory(
    t: Tenant, entry_id: str, version: int | None = None, scope: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return t.memory.restore(entry_id, version, **_scope(scope)).to_dict()


#: How long one offline update request may work (a server thread is held meanwhile and
#: the work runs on if the client leaves): past it no further step starts.
UPDATE_SECONDS = 60.0


def offline_update(
    t: Tenant,
    *,
    top_k: int = 20,
    keep_top_n: int = 10,
    score_threshold: float = 0.8,
    scope: Mapping[str, Any] | None = None,
    max_seconds: float = UPDATE_SECONDS,
    recheck: bool = False,
) -> dict[str, Any]:
    """The offline update of the scope's entries new or changed since last brought up to
    date, held to ``max_seconds`` (``complete``: false when it stopped there; what it did
    stands and the next call goes on; ``lightmem offline-update`` runs the whole-scope
    pass without a limit). ``recheck``: forget what was recorded first, so this call and
    the following ones show the updater everything again."""
    done = t.memory.offline_update_pending(
        top_k,
        keep_top_n,
        score_threshold,
        max_seconds=max_seconds,
        recheck=recheck,
        **_scope(scope),
    )
    return {"queued": done.brought_up_to_date, **done.report.to_dict()}


def summarize(
    t: Tenant,
    *,
    time_window: str | float = "7d",
    retrieval_scope: str = "global",
    scope: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return t.memory.summarize(time_window, retrieval_scope, **_scope(scope)).to_dict()


def stats(t: Tenant, scope: Mapping[str, Any] | None = None) -> dict[str, Any]:
    out = t.memory.stats(**_scope(scope))
    out.pop("store", None)  # a server path is none of the client's business
    return {**out, "graph": t.agent.stats()}


# -- FluxMem --------------------------------------------------------------------------------
def add_knowledge(t: Tenant, docs: Any, source: str = "") -> dict[str, Any]:
    check_value(docs, "docs", strict=False)
    check_value(source, "source", strict=False)
    try:
        return {"ids": t.agent.add_knowledge(docs, source=source)}
    except InvalidInputError as exc:
        # The library names its parameter text_or_docs; the API's field is docs.
        library = "text_or_docs"
        if not str(exc).startswith(library):
            raise
        raise InvalidInputError("docs" + str(exc)[len(library) :]) from exc


def start_task(t: Tenant, task: str, max_rounds: int | None = None) -> dict[str, Any]:
    """Start a FluxMem task; the session is kept in the tenant's store, so any server
    worker (or a restarted server) continues it (see :mod:`lightmem.fluxmem.session`)."""
    return _session_view(t.agent.start_task(task, max_rounds=max_rounds))


def record_step(
    t: Tenant,
    session_id: str,
    *,
    result: Any,
    success: bool,
    feedback: object = None,
    actions: Sequence[str] = (),
    step: int | None = None,
) -> dict[str, Any]:
    """Report what the agent did with the last context; returns the next context (after any
    Stage II repairs) or the task's outcome, and the ``step`` number to report next.
    ``step``: the number of the step reported (the last answer's ``step``); with it a
    report sent again after a lost answer gets the recorded answer instead of being
    applied twice (see :mod:`lightmem.fluxmem.session`)."""
    validate.flag("success", success)
    actions = _strings("actions", actions)
    check_value(list(actions), "actions")
    check_value(result, "result", strict=False)
    check_value(feedback, "feedback", strict=False)
    session = t.agent.resume_task(session_id)
    session.report(StepResult(result, _feedback(feedback), success, tuple(actions)), step=step)
    return _session_view(session)


def _session_view(session: TaskSession) -> dict[str, Any]:
    outcome = None if session.outcome is None else _outcome(session.outcome)
    return {
        "session_id": session.id,
        "context": session.context,
        "outcome": outcome,
        "step": session.step,
    }


def purge_graph(t: Tenant, node_id: str | None = None) -> dict[str, Any]:
    """Erase the tenant's FluxMem graph (knowledge, episodes, skills, history, task
    sessions), or only node ``node_id`` with what holds it, for good; its memories stay
    (see :func:`purge` and :meth:`FluxMemAgent.purge`)."""
    return t.agent.purge(node_id).to_dict()


def consolidate(t: Tenant) -> dict[str, Any]:
    return t.agent.consolidate().to_dict()


def show_subgraph(t: Tenant, task: str) -> dict[str, Any]:
    sub = t.agent.subgraph(task)

    def view(items: Sequence[ScoredNode]) -> list[dict[str, Any]]:
        return [{**s.node.to_dict(), "score": s.score, "why": s.why} for s in items]

    return {
        "task": task,
        "semantic": view(sub.semantic),
        "episodic": view(sub.episodic),
        "procedural": view(sub.procedural),
        "context": serialize(sub),
    }


def graph(t: Tenant, limit: int = 500) -> dict[str, Any]:
    """Nodes and edges for the viewer (newest ``limit`` nodes of each kind)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 5000:
        raise InvalidInputError("limit: expected an integer in [1, 5000]")
    scope = t.agent.scope
    nodes = [
        n
        for kind in ("semantic", "episodic", "procedural")
        for n in t.agent.graph.nodes(kind, scope, limit, newest=True)
    ]
    ids = [n.id for n in nodes]
    edges = t.agent.graph.edges(src=ids, dst=ids)
    return {
        "nodes": [
            {"id": n.id, "kind": n.kind, "text": n.text, "version": n.version} for n in nodes
        ],
        "edges": [e.to_dict() for e in edges],
    }


def graph_history(t: Tenant, limit: int = 100) -> dict[str, Any]:
    return {"events": t.agent.history(limit)}


def _feedback(raw: object) -> str | Feedback | None:
    """The step feedback as REST and MCP send it (both pass it here unvalidated, so the
    two refuse the same things with the same words): text, or the object described by
    :class:`lightmem.server.schemas.StepFeedback`."""
    if raw is None or isinstance(raw, str):
        return raw
    if not isinstance(raw, Mapping):
        raise InvalidInputError(
            f"feedback: expected text or {{{', '.join(FEEDBACK_FIELDS)}}}, got {type(raw).__name__}"
        )
    for key in raw:
        if key not in FEEDBACK_FIELDS:
            raise InvalidInputError(
                f"feedback.{key}: unknown field (known: {', '.join(FEEDBACK_FIELDS)})"
            )
    kind = raw.get("kind")
    if kind not in FAILURE_KINDS:
        raise InvalidInputError(
            f"feedback.kind: must be one of {', '.join(map(repr, FAILURE_KINDS))}"
        )
    steps = _strings("feedback.steps", raw.get("steps") or ())
    node_id = raw.get("node_id")
    if node_id is not None and not isinstance(node_id, str):
        raise InvalidInputError(f"feedback.node_id: expected a string, got {node_id!r:.80}")
    detail = raw.get("detail", "")
    if not isinstance(detail, str):
        raise InvalidInputError(f"feedback.detail: expected a string, got {detail!r:.80}")
    return Feedback(kind, detail, node_id, tuple(steps))


def _outcome(o: Any) -> dict[str, Any]:
    return {
        "success": o.success,
        "episode_id": o.episode_id,
        "attempts": o.attempts,
        "repairs": [{"op": r.op, "node_id": r.node_id, "detail": r.detail} for r in o.repairs],
        "error": o.error,
    }


#: Actions of a step, or steps named by its feedback: a step reports what one attempt did.
MAX_STEP_ITEMS = 1_000


def _strings(name: str, value: object) -> tuple[str, ...]:
    """``value`` as a tuple of strings (a list or tuple of at most :data:`MAX_STEP_ITEMS`)."""
    if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
        raise InvalidInputError(f"{name}: expected a list of strings, got {value!r:.80}")
    if len(value) > MAX_STEP_ITEMS:
        raise InvalidInputError(f"{name}: {len(value)} items, at most {MAX_STEP_ITEMS}")
    return tuple(value)


log = logging.getLogger("lightmem.server")


def public_error(exc: LightMemError) -> tuple[str, str]:
    """The ``(type, message)`` a client is answered for ``exc``. A store or backend
    failure is the server's: its message names files, schemas or endpoints, so the client
    is told what failed and a reference, and the whole error goes to the server's log under
    that reference. Any other error is about the request and is answered as it is."""
    kind = type(exc).__name__
    if not isinstance(exc, StoreError | BackendError) or isinstance(exc, StoreFullError):
        return kind, str(exc)  # a full store is the tenant's to act on (it names no path)
    ref = uuid.uuid4().hex[:12]
    log.error("%s (ref %s): %s", kind, ref, exc, exc_info=exc)
    what = "the store" if isinstance(exc, StoreError) else "a model backend"
    return kind, f"{what} failed on the server; retry later (logged as ref {ref})"

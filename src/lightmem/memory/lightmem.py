"""``LightMemory``: the thin public facade over the LightMem pipeline and its store."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from types import TracebackType
from typing import Any, TypeGuard

from lightmem import validate
from lightmem.config import (
    EmbedderBuilder,
    Settings,
    build_compressor,
    build_embedder,
    build_llm,
    build_store,
    build_token_counter,
    parse_config,
    recorded_embedder,
)
from lightmem.embed.base import Embedder
from lightmem.errors import ConfigError, InvalidInputError, NotFoundError
from lightmem.ledger import ANNOTATIONS, Ledger, UsageRecord, ledgers_of
from lightmem.llm.base import LLMClient
from lightmem.memory import build
from lightmem.memory.params import retrieve_params, scorer
from lightmem.memory.scoping import check_editable, read_scope, serialised
from lightmem.pipeline import validity
from lightmem.pipeline.compress import (
    Compressor,
    EntropyCompressor,
    LLMLingua2Compressor,
    NoCompressor,
)
from lightmem.pipeline.context_format import format_context
from lightmem.pipeline.extract import MemoryManager, retimed
from lightmem.pipeline.ingest import IngestResult
from lightmem.pipeline.messages import MAX_CONTENT_CHARS, MAX_MESSAGES, normalize_messages
from lightmem.pipeline.retrieve import Retriever
from lightmem.pipeline.summarize import (
    KeywordSummarizer,
    LLMSummarizer,
    Summarizer,
    SummaryReport,
    summarize_windows,
)
from lightmem.pipeline.token_count import TokenCounter
from lightmem.pipeline.update import (
    MAX_KEEP_TOP_N,
    MAX_TOP_K,
    OfflineUpdater,
    Updater,
    UpdateReport,
    online_update,
    run_update,
    scope_queue,
)
from lightmem.pipeline.update_llm import LLMUpdater
from lightmem.pipeline.update_pending import PendingUpdate, update_pending
from lightmem.sanitize import check_text
from lightmem.store.base import MemoryStore
from lightmem.store.provisional import is_provisional
from lightmem.store.purge import PurgeReport
from lightmem.types import (
    HistoryEvent,
    MemoryEntry,
    Message,
    RetrievalResults,
)

__all__ = ["LightMemory"]


class LightMemory:
    """Long-term memory for an agent: add conversations, retrieve what matters.

    Backends are instances: pass a store, an embedder and optionally a compressor, memory
    manager, updater and token counter (what ``budget_tokens`` counts), or build them all
    from a config dict with :meth:`from_config`.
    Every method takes an optional ``user_id`` / ``agent_id`` / ``run_id`` scope (what a
    read without ``user_id`` means: :mod:`lightmem.memory.scoping`). Added turns are
    searchable at once (:mod:`lightmem.pipeline.provisional`).
    """

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        *,
        compressor: Compressor | None = None,
        memory_manager: MemoryManager | None = None,
        updater: Updater | None = None,
        settings: Settings | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self.settings = settings or Settings()
        s = self.settings
        self.store = store
        self.embedder = embedder
        self.ledger: Ledger = embedder.ledger
        self.compressor = compressor or EntropyCompressor(s.compress_rate)
        self.memory_manager = memory_manager or build.offline_manager(self.compressor, s)
        self.updater = updater or OfflineUpdater(embedder)
        store.bind_embedder(embedder.name, embedder.dim)
        self._ingestor = build.ingestor(store, embedder, self.compressor, self.memory_manager, s)
        self._retriever = Retriever(store, embedder, token_counter or build_token_counter(s))
        #: Held by writers (they share the pipeline's buffers); retrieval does not take it.
        self.write_lock = threading.RLock()

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any] | None = None,
        *,
        embedder: Embedder | None = None,
        embedders: EmbedderBuilder | None = None,
        compressor: Compressor | None = None,
    ) -> LightMemory:
        """Build from the published config shape; unknown keys raise :class:`ConfigError`.

        ``embedder``: an already loaded embedder to use instead of ``text_embedder``.
        ``embedders``: what builds the embedder instead of :func:`build_embedder` (say, a
        :class:`~lightmem.config.SharedEmbedders` loading each model once for many
        stores). With it, a store that records the embedder it was built with opens with
        that one, and ``text_embedder`` chooses only for a store that records none: each of
        a server's stores may have been re-embedded on its own.
        ``compressor``: an already loaded pre-compressor to use instead of building the one
        the config selects (say, one LLMLingua-2 model shared by many stores); an
        :class:`LLMLingua2Compressor` accounts its calls in this memory's ledger (through
        ``with_ledger``). A config that names ``pre_compress`` or ``pre_compressor`` must
        select the same kind; its rate still sets the keyword scorer's.
        """
        settings = parse_config(config)
        named = bool(config and "text_embedder" in config)
        if embedder is not None and (named or embedders is not None):
            given = "in the config" if named else "as a builder (embedders)"
            raise ConfigError(f"text_embedder: given both {given} and as an instance")
        ledger = embedder.ledger if embedder is not None else Ledger()
        if embedder is None and named and embedders is None:
            embedder = build_embedder(settings, ledger)  # before the store: nothing written
        if compressor is None:
            compressor = build_compressor(settings, ledger)
        else:
            compressor = _given_compressor(compressor, config or {}, settings, ledger)
        llm = build_llm(settings, ledger)
        manager: MemoryManager | None = None
        updater: Updater | None = None
        if llm is not None and settings.llm is not None:
            manager = build.llm_manager(llm, compressor, settings)
            updater = LLMUpdater(llm, pairs_per_call=settings.llm.update_pairs_per_call)
        store = build_store(settings)
        try:
            if embedder is None:  # the one that built the store, else the configured one
                builder = embedders or build_embedder
                settings, embedder = recorded_embedder(settings, store, ledger, builder)
            return cls(
                store,
                embedder,
                compressor=compressor,
                memory_manager=manager,
                updater=updater,
                settings=settings,
                token_counter=build_token_counter(settings),
            )
        except BaseException:
            store.close()
            raise

    # -- ingestion ------------------------------------------------------------------------
    @serialised
    def add_memory(
        self,
        messages: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        force_segment: bool = False,
        force_extract: bool = False,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> IngestResult:
        """Store messages, then segment and extract once the buffers fill (or when forced).

        A message without ``id`` gets one derived from its content, role, speaker, time,
        metadata and position in this call, so a retry stores nothing twice, but the same
        turn at the same position of two calls is one message: to send one conversation in
        several calls, pass batches of
        :func:`lightmem.pipeline.messages.assign_ids` ``(conversation, batch=n)``."""
        scope = validate.scope(user_id, agent_id, run_id)
        validate.flag("force_segment", force_segment)
        validate.flag("force_extract", force_extract)
        msgs = normalize_messages(messages, limit=MAX_MESSAGES)
        self.store.check_room()
        result = self._ingestor.add(
            scope, msgs, force_segment=force_segment, force_extract=force_extract
        )
        if result.entries_created and self.settings.update == "online":
            online_update(self.store, self.embedder, self.updater, scope, result.entries_created)
        if result.messages_added < len(msgs):  # a retry: name the entries already made
            cited = self.store.entries_citing(scope, [m.id for m in msgs])
            old = tuple(i for i in cited if i not in result.entries_created)
            result = replace(result, entries_existing=old)
        self._save_usage()
        return result

    @serialised
    def flush(
        self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> IngestResult:
        """Extract everything still buffered in the scope (or in every scope if none given)."""
        scope = validate.scope(user_id, agent_id, run_id)
        scopes = [scope] if scope.label() != "default" else self.store.buffered_scopes()
        created: list[str] = []
        segments = 0
        for sc in scopes:
            r = self._ingestor.flush(sc)
            created += r.entries_created
            segments += r.segments_created
        self._save_usage()
        return IngestResult(0, 0, segments, tuple(created))

    # -- retrieval ------------------------------------------------------------------------
    def retrieve(
        self,
        query: str,
        limit: int | None = None,
        filters: Mapping[str, Any] | None = None,
        *,
        mode: str | None = None,
        budget_tokens: int | None = None,
        as_of: datetime | str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        all_scopes: bool = False,
        max_chars: int | None = None,
    ) -> RetrievalResults:
        """Most relevant memories for ``query``, best first, within ``limit`` and the budget.

        ``mode``: "embedding", "context" (BM25), "hybrid" or "hierarchical" (topic
        summaries first); default from config. ``filters``: time_from, time_to, speaker,
        topic_id, kind. Without ``user_id`` on a store of several users, give
        ``all_scopes=True`` to search them all. ``as_of``: only what was
        valid then (said, not yet superseded). ``max_chars``: the memory text (stored,
        original and context) the results may hold; past it they end, marked
        ``truncated`` (at least one is kept).
        """
        q = validate.query(query)
        scope = read_scope(self.store, user_id, agent_id, run_id, all_scopes)
        params = retrieve_params(self.settings.retrieve, limit, mode, budget_tokens, max_chars)
        f = validate.filters(filters)
        return self._retriever.retrieve(q, scope, validity.as_of_filters(f, as_of), params)

    def retrieve_context(self, /, query: str, *, cite: bool = False, **kwargs: Any) -> str:
        """:meth:`retrieve`, formatted as prompt context (``cite``: add source ids)."""
        return format_context(self.retrieve(query, **kwargs), cite=cite)

    format_context = staticmethod(format_context)

    # -- entries ----------------------------------------------------------------------------
    def get(
        self,
        entry_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> MemoryEntry:
        scope = validate.scope(user_id, agent_id, run_id)
        entry = self.store.get_entry(validate.entry_id(entry_id), scope)
        if entry is None and is_provisional(entry_id):
            raise NotFoundError(
                f"id: no memory entry {entry_id!r} in this scope (a provisional entry: "
                "once its turn is extracted the extracted entries replace it)"
            )
        if entry is None:
            raise NotFoundError(f"id: no memory entry {entry_id!r} in this scope")
        return entry

    def list_entries(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        limit: int = 100,
        offset: int = 0,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        all_scopes: bool = False,
    ) -> list[MemoryEntry]:
        """Entries in time order, paginated (``all_scopes``: as in :meth:`retrieve`)."""
        scope = read_scope(self.store, user_id, agent_id, run_id, all_scopes)
        validate.offset(offset)
        f = validate.filters(filters)
        return self.store.list_entries(
            scope, f, validate.positive_int("limit", limit, validate.MAX_LIST_LIMIT), offset
        )

    def sources(self, /, entry_id: str, **scope_kw: str | None) -> list[Message]:
        """The original messages an entry was extracted from."""
        entry = self.get(entry_id, **scope_kw)
        return self.store.get_messages(entry.scope, entry.source_ids)

    @serialised
    def update(
        self,
        entry_id: str,
        text: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> MemoryEntry:
        """Replace an entry's text (re-embedded and re-indexed; the old version is kept)."""
        entry = self.get(entry_id, user_id=user_id, agent_id=agent_id, run_id=run_id)
        check_editable(entry.id)
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("text: expected a non-empty string")
        if len(text) > MAX_CONTENT_CHARS:  # as a message's content (a 6 MB text stalled a worker)
            raise InvalidInputError(f"text: longer than {MAX_CONTENT_CHARS} characters")
        check_text(text, "text")
        self.store.check_room()  # the old version stays in the history
        when = retimed(entry, text, self.settings.resolve_time)
        new = replace(entry, text=text, original_text=text, event_time=when)
        vec = self.embedder.embed([new.search_text], op="update")[0]
        out = self.store.update_entry(new, vec, "manual update")
        self._save_usage()
        return out

    @serialised
    def delete(
        self,
        entry_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> MemoryEntry:
        """Delete an entry; it stays in the history and can be restored."""
        scope = validate.scope(user_id, agent_id, run_id)
        check_editable(validate.entry_id(entry_id))
        return self.store.delete_entry(validate.entry_id(entry_id), scope, "manual delete")

    @serialised
    def purge(
        self,
        entry_id: str | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> PurgeReport:
        """Erase an entry, or everything in a scope (entries, history, raw turns, FluxMem
        graph), for good: not restorable, no copy left in the database file."""
        scope = validate.scope(user_id, agent_id, run_id)
        if entry_id is None and scope.label() == "default":
            raise InvalidInputError("entry_id: give an id or a user_id / agent_id / run_id")
        eid = None if entry_id is None else validate.entry_id(entry_id)
        return self.store.purge(scope, eid)

    def history(
        self,
        entry_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> list[HistoryEvent]:
        scope = validate.scope(user_id, agent_id, run_id)
        events = self.store.history(validate.entry_id(entry_id), scope)
        if not events and is_provisional(entry_id):
            self.get(entry_id, user_id=user_id, agent_id=agent_id, run_id=run_id)
            return []  # a provisional entry: never changed, so no history
        if not events:
            raise NotFoundError(f"id: no memory entry {entry_id!r} in this scope")
        return events

    @serialised
    def restore(
        self,
        entry_id: str,
        version: int | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> MemoryEntry:
        """Bring back a version (default: the last one; a superseded entry: current again)."""
        check_editable(validate.entry_id(entry_id))
        self.store.check_room()  # a restore is one more version in the history
        if done := validity.unsupersede(self.store, entry_id, version, user_id, agent_id, run_id):
            return done
        events = self.history(entry_id, user_id=user_id, agent_id=agent_id, run_id=run_id)
        snaps = [e.after for e in events if e.after is not None]
        if version is not None:
            validate.positive_int("version", version, validate.MAX_VERSION)
            snaps = [s for s in snaps if s["version"] == version]
            if not snaps:
                raise NotFoundError(f"version: entry {entry_id!r} has no version {version}")
        target = MemoryEntry.from_dict(snaps[-1])
        vec = self.embedder.embed([target.search_text], op="update")[0]
        out = self.store.restore_entry(target, vec, f"restored version {target.version}")
        self._save_usage()
        return out

    # -- offline update ---------------------------------------------------------------------
    @serialised
    def construct_update_queue_all_entries(
        self,
        top_k: int = 20,
        keep_top_n: int = 10,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> int:
        """For every entry, queue its most similar earlier entries; returns entries queued."""
        validate.positive_int("top_k", top_k, MAX_TOP_K)
        validate.positive_int("keep_top_n", keep_top_n, MAX_KEEP_TOP_N)
        scope = validate.scope(user_id, agent_id, run_id)
        queue, _ = scope_queue(self.store, scope, top_k, keep_top_n)
        self.store.save_update_queue(queue)
        return len(queue)

    @serialised
    def offline_update_all_entries(
        self,
        score_threshold: float = 0.8,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        max_seconds: float | None = None,
        recheck: bool = False,
    ) -> UpdateReport:
        """Merge, update or delete queued overlapping entries (see :class:`Updater`).
        ``max_seconds``: past it no further step of the pass starts; what was done stands
        and the report says ``complete=False`` (a server bounds a request's work so). The
        updater is not shown again what it was shown before unchanged (the report's
        ``skipped``), so a stopped pass resumes and a repeated one costs only what changed;
        ``recheck=True`` shows it everything."""
        _check_threshold(score_threshold)
        deadline = None if max_seconds is None else _deadline(max_seconds)
        validate.flag("recheck", recheck)
        scope = validate.scope(user_id, agent_id, run_id)
        report = run_update(
            self.store,
            self.embedder,
            self.updater,
            scope,
            float(score_threshold),
            deadline=deadline,
            recheck=recheck,
        )
        self._save_usage()
        return report

    @serialised
    def offline_update_pending(
        self,
        top_k: int = 20,
        keep_top_n: int = 10,
        score_threshold: float = 0.8,
        *,
        max_seconds: float,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        recheck: bool = False,
    ) -> PendingUpdate:
        """The offline update of the entries new or changed since they were last brought
        up to date, a part at a time, starting none past ``max_seconds``: each call's work
        grows with those entries times the scope, and the next call goes on where it
        stopped (see :mod:`lightmem.pipeline.update_pending`; a server's update request).
        ``recheck=True`` first forgets what was recorded for the scope, so this call and
        the following ones (without it) show the updater everything again."""
        validate.positive_int("top_k", top_k, MAX_TOP_K)
        validate.positive_int("keep_top_n", keep_top_n, MAX_KEEP_TOP_N)
        _check_threshold(score_threshold)
        deadline = _deadline(max_seconds)
        validate.flag("recheck", recheck)
        scope = validate.scope(user_id, agent_id, run_id)
        if recheck:
            self.store.forget_update_checks(scope)
        done = update_pending(
            self.store,
            self.embedder,
            self.updater,
            scope,
            top_k,
            keep_top_n,
            float(score_threshold),
            deadline,
        )
        self._save_usage()
        return done

    @serialised
    def summarize(
        self,
        time_window: object = "7d",
        retrieval_scope: str = "global",
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> SummaryReport:
        """Summarise facts and events per time window (StructMem cross-event summaries).

        ``retrieval_scope="historical"`` lets each window's summary see the previous one's.
        Summaries are stored as ``kind="summary"`` entries and ranked first by hierarchical
        retrieval; summarising the same window again updates its summary in place. Each
        exact scope (user, agent, run) under the given one gets its own summaries.
        """
        window = validate.time_window(time_window)
        if retrieval_scope not in ("global", "historical"):
            raise InvalidInputError("retrieval_scope: must be 'global' or 'historical'")
        scope = validate.scope(user_id, agent_id, run_id)
        self.store.check_room()
        client = getattr(self.memory_manager, "client", None)
        summarizer: Summarizer = (
            LLMSummarizer(client)
            if isinstance(client, LLMClient)
            else KeywordSummarizer(scorer(self.compressor, self.settings))
        )
        report = summarize_windows(
            self.store,
            self.embedder,
            summarizer,
            scope,
            window,
            retrieval_scope,  # type: ignore[arg-type]
        )
        self._save_usage()
        return report

    # -- bookkeeping ------------------------------------------------------------------------
    def stats(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> dict[str, Any]:
        """Counts in the scope, model usage (all processes that used this store) and the
        store's size: ``size_bytes`` held, ``max_bytes`` its limit (None: none)."""
        scope = validate.scope(user_id, agent_id, run_id)
        self._save_usage()
        usage = self.store.usage()
        total = UsageRecord("all", "all")
        for r in usage:
            if not r.op.endswith(ANNOTATIONS):  # annotations repeat their op's figures
                total.add(r)
        return {
            "store": self.store.path,
            "scope": scope.label(),
            "embedder": self.embedder.name,
            "compressor": self.compressor.name,
            "memory_manager": self.memory_manager.name,
            **self.store.counts(scope),
            "size_bytes": self.store.size_bytes(),
            "max_bytes": self.store.max_bytes,
            "usage": {"total": total.to_dict(), "by_operation": [r.to_dict() for r in usage]},
        }

    def _save_usage(self) -> None:
        """Persist the usage of every backend that accounts model calls (the embedder's
        ledger, and the compressor's, manager's and updater's where they keep their own)."""
        backends = (self.embedder, self.compressor, self.memory_manager, self.updater)
        for ledger in ledgers_of(*backends):
            ledger.save(self.store.record_usage)

    def close(self) -> None:
        """Save the usage not yet saved and close the store (closed even if saving fails;
        the error is raised after)."""
        try:
            self._save_usage()
        finally:
            self.store.close()

    def __enter__(self) -> LightMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _number(value: object) -> TypeGuard[int | float]:
    """True for an int or a float (not a bool, which Python counts as an int)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_threshold(score_threshold: object) -> None:
    if not _number(score_threshold) or not -1.0 <= score_threshold <= 1.0:
        raise InvalidInputError("score_threshold: expected a number in [-1, 1]")


def _deadline(max_seconds: object) -> float:
    """``time.monotonic()`` ``max_seconds`` from now."""
    if not _number(max_seconds) or not 0 < max_seconds < float("inf"):
        raise InvalidInputError("max_seconds: expected a positive number of seconds")
    return time.monotonic() + float(max_seconds)


def _given_compressor(
    compressor: Compressor, config: Mapping[str, Any], s: Settings, ledger: Ledger
) -> Compressor:
    """A compressor passed to :meth:`LightMemory.from_config`, bound to the memory's ledger;
    refused when the config asks for another kind (one of the two would be ignored)."""
    if "pre_compress" in config or "pre_compressor" in config:
        selected = s.compressor if s.pre_compress else NoCompressor.name
        if compressor.name != selected:
            raise ConfigError(
                f"pre_compressor: the config selects {selected!r}, the compressor given is "
                f"{compressor.name!r}"
            )
    if isinstance(compressor, LLMLingua2Compressor):
        return compressor.with_ledger(ledger)
    return compressor

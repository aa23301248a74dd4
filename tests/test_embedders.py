"""Embedders: the offline default, and the OpenAI-compatible client over real HTTP."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lightmem import (
    BackendError,
    ConfigError,
    InvalidInputError,
    LightMemory,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    WordLlamaEmbedder,
)
from lightmem.testing import OpenAIStubServer


def test_wordllama_is_normalised_and_accounted(embedder: WordLlamaEmbedder) -> None:
    def calls(op: str) -> int:
        return sum(r.calls for r in embedder.ledger.totals() if r.op == op)

    before, estimated = calls("t"), calls("t.estimated")
    v = embedder.embed(["a cat on a mat", "a kitten on a rug", "stock market crash"], op="t")
    assert v.shape == (3, 256) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2]
    assert calls("t") == before + 1
    assert calls("t.estimated") == estimated + 1  # a local model reports no token usage
    with pytest.raises(InvalidInputError, match="texts"):
        embedder.embed("not a list")


def test_loading_wordllama_leaves_root_logging_alone() -> None:
    import logging
    import subprocess
    import sys

    code = (
        "import logging; from lightmem import WordLlamaEmbedder;"
        "WordLlamaEmbedder().embed(['x']); r = logging.getLogger();"
        "print(r.level, len(r.handlers))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == [str(logging.WARNING), "0"]


def test_openai_embedder_over_http() -> None:
    with OpenAIStubServer(embedding_dim=32) as stub:
        emb = OpenAIEmbedder("stub-embed", 32, base_url=stub.base_url, api_key="k", batch_size=2)
        v = emb.embed(["alpha beta", "alpha gamma", "delta"])
        assert v.shape == (3, 32)
        assert stub.counters.requests["/v1/embeddings"] == 2  # batched by 2
        (rec,) = emb.ledger.totals()
        assert (rec.calls, rec.items) == (1, 3)


def test_openai_embedder_retries_then_reports(tmp_path: Path) -> None:
    with OpenAIStubServer(embedding_dim=16) as stub:
        emb = OpenAIEmbedder(
            "m", 16, base_url=stub.base_url, api_key="k", max_retries=2, backoff_s=0.01
        )
        stub.fail_next(503, times=1)
        assert emb.embed(["x"]).shape == (1, 16)  # retried
        stub.fail_next(500, times=5)
        with pytest.raises(BackendError, match="failed 3 times: embedding endpoint failed"):
            emb.embed(["y"])
        (rec,) = emb.ledger.totals()  # every attempt accounted, each failed one an error
        assert rec.calls == stub.counters.requests["/v1/embeddings"] == 5
        assert rec.errors == stub.counters.injected == 4


def test_openai_embedder_from_config(tmp_path: Path) -> None:
    with OpenAIStubServer(embedding_dim=24) as stub:
        cfg = {
            "store": {"path": str(tmp_path / "o.db")},
            "text_embedder": {
                "model_name": "openai",
                "configs": {
                    "model": "stub",
                    "embedding_dims": 24,
                    "openai_base_url": stub.base_url,
                    "api_key": "k",
                },
            },
        }
        with LightMemory.from_config(cfg) as mem:
            mem.add_memory({"content": "Pixel the cat likes tuna"}, force_extract=True)
            assert mem.retrieve("cat tuna", mode="embedding")[0].text


def test_local_model_embedder_refuses_hub_names() -> None:
    with pytest.raises(ConfigError, match="not a local folder"):
        SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")

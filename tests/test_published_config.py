"""The published LightMem config shape: retriever names, summary stores, logging and the
other published keys are accepted and mapped (with a note), and still checked."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from lightmem.config import MULTILINGUAL_EMBEDDER, parse_config
from lightmem.errors import ConfigError


def test_published_vector_stores_map_to_the_store_with_a_note(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="lightmem.config"):
        s = parse_config(
            {
                "embedding_retriever": {
                    "model_name": "qdrant",
                    "configs": {"collection_name": "chat", "path": "/data/q"},
                },
                "context_retriever": {"model_name": "BM25"},
            }
        )
    assert s.store_provider == "sqlite"
    assert s.store_path == "/data/q/chat.db" and s.store_folder == "/data/q"
    assert any("'qdrant' is served by the configured store" in n for n in s.notes)
    assert "qdrant" in caplog.text
    faiss = parse_config({"embedding_retriever": {"model_name": "FAISS"}})
    assert faiss.store_path == "lightmem.db" or faiss.store_path.endswith(".db")
    assert any("'FAISS'" in n for n in faiss.notes)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"extract_threshold": 3}, "extract_threshold"),
        ({"embedding_retriever": {"model_name": "milvus"}}, "embedding_retriever.model_name"),
        ({"embedding_retriever": {"configs": {"url": "http://x"}}}, "configs.url"),
        ({"logging": {"level": "LOUD"}}, "logging.level"),
        ({"topic_segmenter": {"model_name": "gpt"}}, "topic_segmenter.model_name"),
        (
            {"text_embedder": {"model_name": "e5-small", "configs": {"embedding_dims": 512}}},
            "embedding_dims",
        ),
    ],
)
def test_published_keys_are_still_checked(config: dict[str, Any], field: str) -> None:
    from lightmem.config import build_embedder
    from lightmem.ledger import Ledger

    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        build_embedder(parse_config(config), Ledger())


def test_the_multilingual_switch_names_the_measured_embedder() -> None:
    s = parse_config({"text_embedder": {"model_name": "multilingual"}})
    assert s.embedder == MULTILINGUAL_EMBEDDER
    assert s.embedder in ("use-multilingual", "e5-small")

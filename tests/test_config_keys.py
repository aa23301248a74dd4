"""Config values are checked at the edge, naming the field: FluxMemConfig counts are
integers and its weights finite (review finding 12); a text_embedder key the chosen
embedder does not use is refused, and metadata_generate: false is noted (finding 9)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from lightmem.config import parse_config
from lightmem.errors import ConfigError
from lightmem.fluxmem import FluxMemConfig


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("top_k_semantic", 2.5, "expected an integer of at least 1, got 2.5"),
        ("chunk_tokens", 50.5, "expected an integer of at least 1, got 50.5"),
        ("candidates", 10.0, "expected an integer of at least 1, got 10.0"),
        ("max_refinement_rounds", 2.0, "expected an integer in [0, 100], got 2.0"),
        ("num_clusters", 3.0, "expected an integer of at least 1, got 3.0"),
        ("seed", True, "expected an integer, got True"),
        ("dense_weight", float("nan"), "expected a finite number, got nan"),
        ("ground_weight", float("inf"), "expected a finite number, got inf"),
        ("mature_similarity", float("nan"), "expected a finite number"),
    ],
)
def test_fluxmem_config_refuses_fractional_counts_and_non_finite_weights(
    name: str, value: object, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"fluxmem.{name}: {message}")):
        FluxMemConfig(**{name: value})  # type: ignore[arg-type]


# -- text_embedder keys the chosen embedder does not use (review finding 9) -----------------
@pytest.mark.parametrize(
    ("embedder", "configs", "key"),
    [
        ("wordllama", {"model": "/models/e5"}, "model"),
        ("wordllama", {"api_key": "sk-1"}, "api_key"),
        ("wordllama", {"openai_base_url": "http://127.0.0.1:9/v1"}, "openai_base_url"),
        ("wordllama", {"model_kwargs": {"device": "cuda"}}, "model_kwargs"),
        ("minilm", {"model_kwargs": {"device": "cuda"}}, "model_kwargs"),
        ("multilingual", {"model": "/models/e5"}, "model"),
        ("huggingface", {"model": "/m", "api_key": "sk-1"}, "api_key"),
    ],
)
def test_text_embedder_keys_the_embedder_does_not_use_are_refused(
    embedder: str, configs: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"text_embedder.configs.{key}: unknown")):
        parse_config({"text_embedder": {"model_name": embedder, "configs": configs}})


def test_text_embedder_keys_the_embedder_uses_are_read() -> None:
    # The published LightMem shape for a local model (README of zjunlp/LightMem).
    hf = parse_config(
        {
            "text_embedder": {
                "model_name": "huggingface",
                "configs": {
                    "model": "/m",
                    "embedding_dims": 384,
                    "model_kwargs": {"device": "cuda"},
                },
            }
        }
    )
    assert (hf.embedder_model, hf.embedding_dims, hf.embedder_device) == ("/m", 384, "cuda")
    oa = parse_config(
        {
            "text_embedder": {
                "model_name": "openai",
                "configs": {"model": "e", "api_key": "k", "openai_base_url": "http://h/v1"},
            }
        }
    )
    assert (oa.embedder_model, oa.embedder_api_key, oa.embedder_base_url) == (
        "e",
        "k",
        "http://h/v1",
    )
    with pytest.raises(ConfigError, match=re.escape("supported by the 'wordllama' embedder")):
        parse_config({"text_embedder": {"configs": {"model": "/models/e5"}}})


def test_metadata_generate_false_is_noted_as_not_applied() -> None:
    off = parse_config({"metadata_generate": False})
    assert any(n.startswith("metadata_generate: false not applied") for n in off.notes)
    on = parse_config({"metadata_generate": True})
    assert not any("not applied" in n for n in on.notes if n.startswith("metadata_generate"))
    assert any(n.startswith("metadata_generate") for n in on.notes)
    assert not any(n.startswith("metadata_generate") for n in parse_config({}).notes)

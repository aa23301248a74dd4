"""Config values are checked at the edge, naming the field: FluxMemConfig counts are
integers and its weights finite (review finding 12)."""

from __future__ import annotations

import re

import pytest

from lightmem.errors import ConfigError
from lightmem.fluxmem import FluxMemConfig


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("top_k_semantic", 2.5, "expected an integer, got 2.5"),
        ("chunk_tokens", 50.5, "expected an integer, got 50.5"),
        ("candidates", 10.0, "expected an integer, got 10.0"),
        ("max_refinement_rounds", 2.0, "expected an integer"),
        ("num_clusters", 3.0, "expected an integer"),
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

"""FluxMem configuration (the published fields and defaults)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from lightmem.errors import ConfigError

__all__ = ["FluxMemConfig"]


@dataclass(frozen=True)
class FluxMemConfig:
    """Stage I sizes and score weights, Stage II/III loop bounds.

    ``num_clusters=None`` means max(1, floor(sqrt(n_episodes / 2))). ``ground_weight``
    scales how much similar past episodes pull in (or, after a prune, push out) the facts
    linked to them; ``candidates`` is how many facts each index proposes before fusion.
    """

    top_k_semantic: int = 5
    top_k_episodic: int = 3
    max_refinement_rounds: int = 5
    pems_threshold: float = 0.01
    max_consolidation_rounds: int = 5
    num_clusters: int | None = None
    dense_weight: float = 1.0
    bm25_weight: float = 0.5
    llm_weight: float = 0.3
    ground_weight: float = 1.0
    candidates: int = 50
    chunk_tokens: int = 120
    seed: int = 0
    mature_similarity: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            # The annotation says which: counts and sizes are "int" (2.5 facts is a slice
            # index error later), weights and thresholds "float" (NaN passes every range
            # check and silently scores nothing).
            if f.type == "int | None" and value is None:
                continue
            if f.type.startswith("int"):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ConfigError(f"fluxmem.{f.name}: expected an integer, got {value!r}")
            elif (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise ConfigError(f"fluxmem.{f.name}: expected a finite number, got {value!r}")
        for name in ("top_k_semantic", "top_k_episodic", "candidates", "chunk_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"fluxmem.{name}: must be at least 1")
        for name in ("max_refinement_rounds", "max_consolidation_rounds"):
            if not 0 <= getattr(self, name) <= 100:
                raise ConfigError(f"fluxmem.{name}: must be in [0, 100]")
        if self.num_clusters is not None and self.num_clusters < 1:
            raise ConfigError("fluxmem.num_clusters: must be at least 1 or None")
        if not 0 <= self.mature_similarity <= 1:
            raise ConfigError("fluxmem.mature_similarity: must be in [0, 1] (0 = off)")
        if not 0 < self.pems_threshold < 1:
            raise ConfigError("fluxmem.pems_threshold: must be in (0, 1)")
        for name in ("dense_weight", "bm25_weight", "llm_weight", "ground_weight"):
            if getattr(self, name) < 0:
                raise ConfigError(f"fluxmem.{name}: must not be negative")

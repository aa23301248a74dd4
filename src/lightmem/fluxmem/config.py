"""FluxMem configuration (the published fields and defaults)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from lightmem.errors import ConfigError
from lightmem.validate import whole_number

__all__ = ["FluxMemConfig"]


#: (least, most) of the integer fields (None: unbounded; ``num_clusters`` may be None).
_INT_BOUNDS: dict[str, tuple[int | None, int | None]] = {
    "top_k_semantic": (1, None),
    "top_k_episodic": (1, None),
    "candidates": (1, None),
    "chunk_tokens": (1, None),
    "num_clusters": (1, None),
    "max_refinement_rounds": (0, 100),
    "max_consolidation_rounds": (0, 100),
}


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
                whole_number(
                    f"fluxmem.{f.name}",
                    value,
                    *_INT_BOUNDS.get(f.name, (None, None)),
                    error=ConfigError,
                )
            elif (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise ConfigError(f"fluxmem.{f.name}: expected a finite number, got {value!r}")
        if not 0 <= self.mature_similarity <= 1:
            raise ConfigError("fluxmem.mature_similarity: must be in [0, 1] (0 = off)")
        if not 0 < self.pems_threshold < 1:
            raise ConfigError("fluxmem.pems_threshold: must be in (0, 1)")
        for name in ("dense_weight", "bm25_weight", "llm_weight", "ground_weight"):
            if getattr(self, name) < 0:
                raise ConfigError(f"fluxmem.{name}: must not be negative")

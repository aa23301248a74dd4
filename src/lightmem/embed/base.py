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

#: Every text reaches a backend in windows of at most this many characters ...
EMBED_CHUNK_CHARS = 2_000
#: ... and at most this many windows per text (evenly spaced over a longer text), whose
#: vectors are averaged: a text of any length costs a bounded amount of work and memory.
EMBED_MAX_CHUNKS = 8
#: One backend call gets at most this many texts, and its longest text times its number of
#: texts stays under EMBED_BATCH_CHARS, so padding to the longest cannot multiply memory.
EMBED_BATCH_ITEMS = 64
EMBED_BATCH_CHARS = 64_000


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
        """One L2-normalised row per text. Long texts are embedded as the mean of at most
        :data:`EMBED_MAX_CHUNKS` windows of :data:`EMBED_CHUNK_CHARS` characters; backend
        calls are batched by length (:data:`EMBED_BATCH_ITEMS`, :data:`EMBED_BATCH_CHARS`)."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError("texts: expected a sequence of strings")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        pieces: list[str] = []
        owner: list[int] = []
        for i, text in enumerate(texts):
            for window in windows(text):
                pieces.append(window)
                owner.append(i)
        rows = np.zeros((len(pieces), self.dim), dtype=np.float32)
        with self.ledger.measure("embed", op) as call:
            call.items = len(texts)
            call.prompt_tokens = sum(estimate_tokens(p) for p in pieces)
            for batch in batches([len(p) for p in pieces]):
                rows[batch] = self._checked([pieces[j] for j in batch])
        rows = _normalised(rows)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        np.add.at(out, np.asarray(owner), rows)
        return _normalised(out)

    def _checked(self, batch: Sequence[str]) -> Vectors:
        out = np.asarray(self._embed(batch), dtype=np.float32)
        if out.shape != (len(batch), self.dim):
            raise BackendError(
                f"embedder {self.name!r} returned shape {out.shape}, "
                f"expected ({len(batch)}, {self.dim})"
            )
        return out


def windows(text: str) -> list[str]:
    """What of ``text`` is embedded: the whole text when short, else consecutive windows of
    :data:`EMBED_CHUNK_CHARS`, or :data:`EMBED_MAX_CHUNKS` of them spread evenly over it."""
    size = EMBED_CHUNK_CHARS
    if len(text) <= size:
        return [text]
    count = -(-len(text) // size)
    if count <= EMBED_MAX_CHUNKS:
        return [text[k * size : (k + 1) * size] for k in range(count)]
    last = len(text) - size
    starts = [round(k * last / (EMBED_MAX_CHUNKS - 1)) for k in range(EMBED_MAX_CHUNKS)]
    return [text[s : s + size] for s in starts]


def batches(lengths: Sequence[int]) -> list[list[int]]:
    """Indices grouped shortest first, so each batch pads to a length close to its texts'
    own, within :data:`EMBED_BATCH_ITEMS` and :data:`EMBED_BATCH_CHARS` (longest x count)."""
    out: list[list[int]] = []
    current: list[int] = []
    for j in sorted(range(len(lengths)), key=lengths.__getitem__):
        longest = max(lengths[j], 1)
        if current and (
            len(current) >= EMBED_BATCH_ITEMS or (len(current) + 1) * longest > EMBED_BATCH_CHARS
        ):
            out.append(current)
            current = []
        current.append(j)
    if current:
        out.append(current)
    return out


def _normalised(rows: Vectors) -> Vectors:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(rows / norms, dtype=np.float32)

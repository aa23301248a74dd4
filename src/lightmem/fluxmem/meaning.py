"""Likeness of short names by meaning, through the agent's own embedder: what a ``pick``
slot guesses by when a thing shares no word with anything its table knows ("dirty socks"
is like "dirty shirt", and "golf shoes" like a "shoe cabinet")."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lightmem.embed.base import Embedder, Vectors
from lightmem.errors import ConfigError
from lightmem.validate import whole_number

__all__ = ["KEEP_NAMES", "Meaning"]

#: Names whose vectors are remembered at most (a game's things and places are a few
#: hundred; a long-running agent meeting ever new names must not grow without bound).
KEEP_NAMES = 20_000


class Meaning:
    """Cosine likeness of names by ``embedder``, each distinct name embedded once while
    at most ``keep`` are remembered (the calls are accounted in the embedder's ledger)."""

    def __init__(self, embedder: Embedder, keep: int = KEEP_NAMES) -> None:
        self.embedder = embedder
        self.keep = whole_number("keep", keep, 1, error=ConfigError)
        self.vectors: dict[str, Vectors] = {}

    def likeness(self, text: str, others: Sequence[str]) -> list[float]:
        """How alike ``text`` is to each of ``others`` (cosine, -1 to 1)."""
        new = sorted({t.lower() for t in (text, *others)} - self.vectors.keys())
        if new:
            if len(self.vectors) + len(new) > self.keep:
                self.vectors.clear()  # then this call's names are embedded again below
                new = sorted({t.lower() for t in (text, *others)})
            rows = self.embedder.embed(new, op="fluxmem.meaning")
            self.vectors.update(zip(new, rows, strict=True))
        if not others:
            return []
        mine = self.vectors[text.lower()]
        theirs = np.stack([self.vectors[o.lower()] for o in others])
        return [float(x) for x in theirs @ mine]

"""Likeness of short names by meaning, through the agent's own embedder: what a ``pick``
slot guesses by when a thing shares no word with anything its table knows ("dirty socks"
is like "dirty shirt", and "golf shoes" like a "shoe cabinet")."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lightmem.embed.base import Embedder, Vectors


class Meaning:
    """Cosine likeness of names by ``embedder``, each distinct name embedded once (the
    calls are accounted in the embedder's ledger)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.vectors: dict[str, Vectors] = {}

    def likeness(self, text: str, others: Sequence[str]) -> list[float]:
        """How alike ``text`` is to each of ``others`` (cosine, -1 to 1)."""
        new = sorted({t.lower() for t in (text, *others)} - self.vectors.keys())
        if new:
            rows = self.embedder.embed(new, op="fluxmem.meaning")
            self.vectors.update(zip(new, rows, strict=True))
        if not others:
            return []
        mine = self.vectors[text.lower()]
        theirs = np.stack([self.vectors[o.lower()] for o in others])
        return [float(x) for x in theirs @ mine]

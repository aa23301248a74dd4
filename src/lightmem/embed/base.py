"""The embedder interface."""

from __future__ import annotations

import copy
import functools
import importlib.util
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from lightmem.errors import BackendError, InvalidInputError, LightMemError
from lightmem.ledger import Ledger, UsageRecord
from lightmem.retry import with_retries
from lightmem.sanitize import check_unicode
from lightmem.text import estimate_tokens

__all__ = [
    "EMBED_BATCH_CHARS",
    "EMBED_BATCH_ITEMS",
    "EMBED_CHUNK_CHARS",
    "EMBED_MAX_CHUNKS",
    "Embedder",
    "LazyModel",
    "M",
    "Vectors",
    "batches",
    "importable",
    "windows",
]

Vectors = npt.NDArray[np.float32]
M = TypeVar("M")

#: Every text reaches a backend in windows of at most this many characters ...
EMBED_CHUNK_CHARS = 2_000
#: ... and at most this many windows per text (evenly spaced over a longer text), whose
#: vectors are averaged: a text of any length costs a bounded amount of work and memory.
EMBED_MAX_CHUNKS = 8
#: One backend call gets at most this many texts, and its longest text times its number of
#: texts stays under EMBED_BATCH_CHARS, so padding to the longest cannot multiply memory.
EMBED_BATCH_ITEMS = 64
EMBED_BATCH_CHARS = 64_000


def importable(*modules: str) -> bool:
    """Whether every one of the top-level ``modules`` can be imported (found, not run)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except (ImportError, ValueError):  # a module whose import failed before, or half-set
        return False


class LazyModel(Generic[M]):
    """What a backend loads on first use (its weights, an engine), loaded once by the first
    thread that needs it while the others wait. An embedder keeps it in an attribute, so the
    copies :meth:`Embedder.with_ledger` makes share this holder and with it the one model,
    whichever copy loads it. A failed load is tried again by the next call."""

    def __init__(self, load: Callable[[], M]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._value: M | None = None

    def get(self) -> M:
        """The model, loading it now if no copy has yet."""
        value = self._value
        if value is None:
            with self._lock:
                value = self._value
                if value is None:
                    value = self._load()
                    self._value = value
        return value

    @property
    def loaded(self) -> bool:
        return self._value is not None


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors.

    Subclasses implement :meth:`_embed` only (or :meth:`_embed_reported`, when the backend
    reports token usage), and keep what they load lazily in a :class:`LazyModel`.
    :meth:`embed` validates input, normalises the output, turns a backend's own exceptions
    into :class:`BackendError`, retries a :class:`~lightmem.errors.TransientBackendError`
    (``max_attempts``, 1 unless the backend is remote) and records every call in
    :attr:`ledger`.
    """

    #: Stable identity written into a store, so a store is never searched with another model.
    name: str
    dim: int

    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = ledger if ledger is not None else Ledger()
        self.max_attempts = 1
        self.backoff_s = 0.5
        self.max_backoff_s = 8.0
        self._sleep: Callable[[float], None] = time.sleep

    def with_ledger(self, ledger: Ledger) -> Embedder:
        """The same model (loaded once, by whichever copy needs it first) accounting into
        another ledger, e.g. per tenant."""
        twin = copy.copy(self)  # shallow: the LazyModel holders (and clients) are shared
        twin.ledger = ledger
        twin._own_caches()
        return twin

    def missing(self) -> str:
        """What must be installed before this embedder can run ("" when nothing is
        missing). Models load on first use, so this is what a config's embedder is checked
        with when it is built: before a store is bound to an embedder that cannot run."""
        return ""

    def _own_caches(self) -> None:
        """Give a :meth:`with_ledger` twin its own caches of what was embedded (none here):
        a cache shared by tenants would let one time its embeddings to learn what another
        embedded lately."""
        return None

    @abstractmethod
    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        """Return one row per text (any float dtype, any norm)."""

    def _embed_reported(self, texts: Sequence[str]) -> tuple[npt.NDArray[np.floating], int | None]:
        """:meth:`_embed`'s rows and the prompt tokens the backend reports for them, or None
        when it reports none (the ledger then records an estimate, flagged as one)."""
        return self._embed(texts), None

    def embed(self, texts: Sequence[str], *, op: str = "embed") -> Vectors:
        """One L2-normalised row per text. Long texts are embedded as the mean of at most
        :data:`EMBED_MAX_CHUNKS` windows of :data:`EMBED_CHUNK_CHARS` characters; backend
        calls are batched by length (:data:`EMBED_BATCH_ITEMS`, :data:`EMBED_BATCH_CHARS`).
        A text that is not valid Unicode (a lone surrogate) is refused with
        :class:`InvalidInputError` naming it."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError("texts: expected a sequence of strings")
        for i, text in enumerate(texts):
            check_unicode(text, f"texts[{i}]")  # not check_text: a NUL can be embedded
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
            for batch in batches([len(p) for p in pieces]):
                chunk = [pieces[j] for j in batch]
                rows[batch], reported = self._attempts(chunk, op)
                if reported is None:  # a call with any estimated part is flagged estimated
                    call.estimated = True
                    reported = sum(estimate_tokens(p) for p in chunk)
                call.prompt_tokens += reported
        rows = _normalised(rows)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        np.add.at(out, np.asarray(owner), rows)
        return _normalised(out)

    def _attempts(self, chunk: Sequence[str], op: str) -> tuple[Vectors, int | None]:
        def failed(_: BackendError) -> None:
            # Each retried request is a failed call of ``op`` (its time is counted in the
            # enclosing call's latency); the last one is that call itself.
            self.ledger.record(UsageRecord("embed", op, calls=1, errors=1))

        return with_retries(
            functools.partial(self._checked, chunk),
            attempts=self.max_attempts,
            what=f"embedder {self.name!r}",
            backoff_s=self.backoff_s,
            max_backoff_s=self.max_backoff_s,
            sleep=self._sleep,
            on_retry=failed,
        )

    def _checked(self, batch: Sequence[str]) -> tuple[Vectors, int | None]:
        try:
            raw, reported = self._embed_reported(batch)
            out = np.asarray(raw, dtype=np.float32)
        except LightMemError:
            raise
        except Exception as exc:
            # The one translation of every backend's own failures (a tokenizer's TypeError,
            # an engine's RuntimeError) into lightmem's error type.
            raise BackendError(
                f"embedder {self.name!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if out.shape != (len(batch), self.dim):
            raise BackendError(
                f"embedder {self.name!r} returned shape {out.shape}, "
                f"expected ({len(batch)}, {self.dim})"
            )
        return out, reported


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

"""The single accounting point for model calls: counts, tokens and latency per operation.

Token counts are the server's reported ``usage`` wherever a server returns one. A call whose
counts had to be estimated is recorded as usual and, in addition, under the operation
``"<op>.estimated"`` (same kind), so the share of estimated figures is always visible:
:func:`token_sources` splits any set of records into reported and estimated tokens.
Companion operations (``.estimated``, ``.rejected``, ``.unusable``, ``.cut``, ``.fallback``)
are annotations of their operation, not extra calls: sum calls over the plain ones.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = [
    "ANNOTATIONS",
    "Accounted",
    "Ledger",
    "UsageRecord",
    "calls",
    "ledgers_of",
    "token_sources",
]


@dataclass(slots=True)
class UsageRecord:
    """Aggregated usage of one (kind, operation) pair, e.g. ("embed", "ingest")."""

    kind: str
    op: str
    calls: int = 0
    items: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    errors: int = 0

    def add(self, other: UsageRecord) -> None:
        self.calls += other.calls
        self.items += other.items
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.latency_s += other.latency_s
        self.errors += other.errors

    def to_dict(self) -> dict[str, float | int | str]:
        return {
            "kind": self.kind,
            "op": self.op,
            "calls": self.calls,
            "items": self.items,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": round(self.latency_s, 6),
            "errors": self.errors,
        }


#: suffixes of the annotation records kept beside an operation's own record
ANNOTATIONS = (".estimated", ".rejected", ".unusable", ".cut", ".fallback")


@dataclass(slots=True)
class _Call:
    items: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: the token counts are estimates (the server reported no usage)
    estimated: bool = False


@dataclass
class Ledger:
    """Thread-safe usage counters. ``save`` hands the not-yet-persisted part to a store."""

    _totals: dict[tuple[str, str], UsageRecord] = field(default_factory=dict)
    _unsaved: dict[tuple[str, str], UsageRecord] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def measure(self, kind: str, op: str) -> Iterator[_Call]:
        """Time one call; the caller fills in items and tokens on the yielded object."""
        call = _Call()
        start = time.perf_counter()
        failed = False
        try:
            yield call
        except BaseException:
            failed = True
            raise
        finally:
            rec = UsageRecord(
                kind=kind,
                op=op,
                calls=1,
                items=call.items,
                prompt_tokens=call.prompt_tokens,
                completion_tokens=call.completion_tokens,
                latency_s=time.perf_counter() - start,
                errors=int(failed),
            )
            self.record(rec)
            if call.estimated and not failed:
                est = self._copy(rec)
                est.op = f"{op}.estimated"
                est.latency_s = 0.0
                self.record(est)

    def record(self, rec: UsageRecord) -> None:
        key = (rec.kind, rec.op)
        with self._lock:
            for table in (self._totals, self._unsaved):
                table.setdefault(key, UsageRecord(rec.kind, rec.op)).add(rec)

    def totals(self) -> list[UsageRecord]:
        """Usage recorded by this process, one record per (kind, op)."""
        with self._lock:
            return [self._copy(r) for r in self._totals.values()]

    def drain(self) -> list[UsageRecord]:
        """Return and forget the usage not yet handed out (for persisting)."""
        with self._lock:
            out = list(self._unsaved.values())
            self._unsaved = {}
            return out

    def save(self, write: Callable[[list[UsageRecord]], None]) -> None:
        """Hand the usage not yet saved to ``write`` (e.g. a store's ``record_usage``); it
        is forgotten only once ``write`` returns. If ``write`` raises, it is kept (with
        whatever was recorded meanwhile) for the next save."""
        records = self.drain()
        try:
            write(records)
        except BaseException:
            with self._lock:
                for rec in records:
                    key = (rec.kind, rec.op)
                    self._unsaved.setdefault(key, UsageRecord(rec.kind, rec.op)).add(rec)
            raise

    @staticmethod
    def _copy(r: UsageRecord) -> UsageRecord:
        c = UsageRecord(r.kind, r.op)
        c.add(r)
        return c


def calls(records: Iterable[UsageRecord], kind: str | None = None) -> int:
    """Model calls in ``records`` (of ``kind`` if given), each counted once: annotation
    records repeat or qualify their operation's figures and are left out."""
    return sum(
        r.calls
        for r in records
        if (kind is None or r.kind == kind) and not r.op.endswith(ANNOTATIONS)
    )


def token_sources(records: list[UsageRecord], kind: str = "llm") -> dict[str, dict[str, int]]:
    """Calls and tokens of ``kind`` split into what servers reported and what was estimated
    (annotation records other than ``.estimated`` carry no tokens and are left out)."""
    total = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    est = dict.fromkeys(total, 0)
    for r in records:
        if r.kind != kind:
            continue
        target = est if r.op.endswith(".estimated") else None
        if target is None and r.op.endswith(ANNOTATIONS):
            continue
        for k in total:
            (target if target is not None else total)[k] += int(getattr(r, k))
    reported = {k: total[k] - est[k] for k in total}
    return {"reported": reported, "estimated": est}


@runtime_checkable
class Accounted(Protocol):
    """A backend that accounts its model calls in a ledger (an embedder, an LLM client, an
    LLM-backed manager, updater or reasoner, the LLMLingua-2 compressor). A facade saves the
    ledger of every backend it was given that is one, so no call escapes the usage tables."""

    @property
    def ledger(self) -> Ledger: ...


def ledgers_of(*backends: object) -> list[Ledger]:
    """The distinct ledgers of those ``backends`` that are :class:`Accounted`, in order."""
    out: dict[int, Ledger] = {}
    for b in backends:
        if isinstance(b, Accounted):
            out.setdefault(id(b.ledger), b.ledger)
    return list(out.values())

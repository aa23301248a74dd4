"""Packing a call's inputs into requests that fit a model's context, and cutting texts that
do not fit, said so: every prompt of the pipeline, FluxMem and the benches that cuts texts
does it through :func:`cut_reported` (or, leaving items out, reports it with
:func:`report_cut`), which logs a warning and counts the texts shortened or left out as
``("llm", "<op>.cut")``, as :class:`~lightmem.llm.base.LLMClient` does for a request it
cuts. Only the prompt is cut: what is stored stays whole."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from lightmem.ledger import UsageRecord
from lightmem.llm.base import LLMClient
from lightmem.llm.schema import cut_to_tokens, prompt_tokens_bound

__all__ = ["T", "cut_reported", "cut_texts", "pack", "report_cut"]

log = logging.getLogger("lightmem.llm")

T = TypeVar("T")


def pack(items: Sequence[T], fits: Callable[[list[T]], bool]) -> list[list[T]]:
    """Consecutive groups of ``items``, each as long as ``fits`` allows (an item that does
    not fit alone gets a group of its own: cut it with :func:`cut_texts` first)."""
    groups: list[list[T]] = []
    for item in items:
        if groups and fits([*groups[-1], item]):
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def cut_texts(texts: Sequence[str], fits: Callable[[list[str]], bool]) -> list[str]:
    """``texts`` with every one longer than some token limit cut to that limit, the largest
    limit for which ``fits`` holds (texts already short enough stay whole)."""
    if fits(list(texts)):
        return list(texts)

    def cut(n: int) -> list[str]:
        return [cut_to_tokens(t, n) for t in texts]

    lo, hi = 0, max((prompt_tokens_bound(t) for t in texts), default=0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(cut(mid)):
            lo = mid
        else:
            hi = mid - 1
    return cut(lo)


def cut_reported(
    client: LLMClient, op: str, texts: Sequence[str], fits: Callable[[list[str]], bool]
) -> list[str]:
    """:func:`cut_texts` for a prompt of ``op`` sent to ``client``,
    reported in its ledger (``items``: the texts shortened) and in the log."""
    out = cut_texts(texts, fits)
    report_cut(client, op, sum(a != b for a, b in zip(texts, out, strict=True)))
    return out


def report_cut(client: LLMClient, op: str, n: int) -> None:
    """Log and count in ``client``'s ledger ``n`` texts of ``op``'s prompt cut or left out
    to fit the model's context (nothing when ``n`` is 0)."""
    if n:
        log.warning("LLM %s: %d text(s) cut in the prompt to fit the model's context", op, n)
        client.ledger.record(UsageRecord("llm", f"{op}.cut", items=n))

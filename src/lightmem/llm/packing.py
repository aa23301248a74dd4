"""Packing a call's inputs into requests that fit a model's context."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from lightmem.llm.schema import cut_to_tokens, prompt_tokens_bound

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

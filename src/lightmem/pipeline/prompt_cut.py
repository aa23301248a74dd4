"""Texts cut to fit a model's context, and said so: every pipeline and FluxMem prompt cuts
through :func:`cut_reported`, which logs a warning and counts the texts it shortened in the
ledger as ``("llm", "<op>.cut")``, as :class:`~lightmem.llm.base.LLMClient` does for a
request it cuts. Only the prompt is cut: what is stored stays whole."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from lightmem.ledger import UsageRecord
from lightmem.llm.base import LLMClient
from lightmem.llm.packing import cut_texts

log = logging.getLogger("lightmem.llm")


def cut_reported(
    client: LLMClient, op: str, texts: Sequence[str], fits: Callable[[list[str]], bool]
) -> list[str]:
    """:func:`~lightmem.llm.packing.cut_texts` for a prompt of ``op`` sent to ``client``,
    reported in its ledger (``items``: the texts shortened) and in the log."""
    out = cut_texts(texts, fits)
    n = sum(a != b for a, b in zip(texts, out, strict=True))
    if n:
        log.warning("LLM %s: %d text(s) cut in the prompt to fit the model's context", op, n)
        client.ledger.record(UsageRecord("llm", f"{op}.cut", items=n))
    return out

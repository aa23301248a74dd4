"""Splitting knowledge into semantic nodes."""

from __future__ import annotations

import re

from lightmem.text import estimate_tokens

__all__ = ["chunk"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def chunk(text: str, max_tokens: int) -> list[str]:
    """Paragraphs, split further at sentence ends so no chunk exceeds ``max_tokens``."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        if not para:
            continue
        if estimate_tokens(para) <= max_tokens:
            out.append(para)
            continue
        current: list[str] = []
        for sentence in _SENTENCE.split(para):
            candidate = " ".join([*current, sentence])
            if current and estimate_tokens(candidate) > max_tokens:
                out.append(" ".join(current))
                current = [sentence]
            else:
                current.append(sentence)
        if current:
            out.append(" ".join(current))
    return out

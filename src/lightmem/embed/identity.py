"""From the embedder a store records (its ``name``) back to the ``text_embedder`` config
section that builds it: a store opened without ``text_embedder`` uses the embedder that
built it, and a store opened with another one says what to set."""

from __future__ import annotations

import json
import re
from typing import Any

from lightmem.embed.e5 import E5SmallEmbedder
from lightmem.embed.minilm import LINES_NAME, MiniLMEmbedder
from lightmem.embed.use_multilingual import USEMultilingualEmbedder

__all__ = ["how_to_open", "text_embedder_for"]

_FIXED: dict[str, dict[str, Any]] = {
    E5SmallEmbedder.name: {"model_name": "e5-small"},
    USEMultilingualEmbedder.name: {"model_name": "use-multilingual"},
    MiniLMEmbedder.name: {"model_name": "minilm"},
    LINES_NAME: {"model_name": "minilm-lines"},
}


def text_embedder_for(name: str) -> tuple[dict[str, Any], str] | None:
    """The ``text_embedder`` section whose embedder records ``name``, and what else it
    needs that a store does not record ("" when the section alone builds it): an
    ``openai`` embedder's endpoint, a ``huggingface`` embedder's model folder. None for a
    name that no config builds."""
    if name in _FIXED:
        return dict(_FIXED[name]), ""
    if m := re.fullmatch(r"wordllama:l2_supercat:(\d+)", name):
        dims = int(m[1])
        configs: dict[str, Any] = {} if dims == 256 else {"configs": {"embedding_dims": dims}}
        return {"model_name": "wordllama", **configs}, ""
    if m := re.fullmatch(r"openai:(.+):(\d+)", name):
        configs = {"model": m[1], "embedding_dims": int(m[2])}
        return {"model_name": "openai", "configs": configs}, "the endpoint that built it"
    if m := re.fullmatch(r"sentence-transformers:(.+):\d+", name):
        folder = f"<folder>/{m[1]}"
        return {"model_name": "huggingface", "configs": {"model": folder}}, "its model folder"
    return None


def how_to_open(name: str) -> str:
    """What to set to open a store built with the embedder recorded as ``name``."""
    found = text_embedder_for(name)
    if found is None:
        return "open it with the embedder that built it"
    section, needs = found
    return f"set text_embedder to {json.dumps(section)}" + (f" with {needs}" if needs else "")

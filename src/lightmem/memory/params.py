"""The argument helpers of :class:`~lightmem.memory.LightMemory`: retrieval parameters from
call arguments, the extraction roles per ``messages_use`` and the word-surprisal scorer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from lightmem import validate
from lightmem.config import Settings
from lightmem.errors import InvalidInputError
from lightmem.pipeline.compress import Compressor, EntropyCompressor
from lightmem.pipeline.retrieve_params import RetrieveParams

__all__ = ["ROLES", "retrieve_params", "scorer"]

#: The roles extraction reads, per ``messages_use`` (absent: every role).
ROLES: Mapping[str, frozenset[str]] = MappingProxyType(
    {"user_only": frozenset({"user"}), "assistant_only": frozenset({"assistant"})}
)

_MODES = ("embedding", "context", "hybrid", "hierarchical")
MAX_CHARS = 10**12  # max_chars: any int a caller means (a bound on a bound)


def retrieve_params(
    base: RetrieveParams,
    limit: int | None,
    mode: str | None,
    budget_tokens: int | None,
    max_chars: int | None = None,
) -> RetrieveParams:
    """``base`` (the configured defaults) with the arguments a caller gave, each checked."""
    p = base
    if max_chars is not None:
        p = replace(p, max_chars=validate.positive_int("max_chars", max_chars, MAX_CHARS))
    if limit is not None:
        p = replace(p, limit=validate.positive_int("limit", limit, validate.MAX_LIMIT))
    if budget_tokens is not None:
        p = replace(
            p,
            budget_tokens=validate.positive_int(
                "budget_tokens", budget_tokens, validate.MAX_BUDGET_TOKENS
            ),
        )
    if mode is not None:
        if mode not in _MODES:
            raise InvalidInputError(
                f"mode: {mode!r} is not one of embedding, context, hybrid, hierarchical"
            )
        p = replace(p, mode=mode)  # type: ignore[arg-type]
    return p


def scorer(compressor: Compressor, settings: Settings) -> EntropyCompressor:
    """The word-surprisal model used for keyword summaries (shared with the compressor)."""
    if isinstance(compressor, EntropyCompressor):
        return compressor
    return EntropyCompressor(settings.compress_rate)

"""Model text on its way into the store: held to :mod:`lightmem.sanitize`'s check of
stored text, but refused as :class:`~lightmem.llm.base.InvalidReply`, so the client asks the
model to repair its answer instead of the store (or the user's input) taking the blame.

On the last allowed answer there is no repair left: :func:`set_aside` then drops only the
item (a fact, an event, an action) holding the refused text, as a fact citing an unknown
turn is dropped, and :func:`count_rejected` counts both as ``("llm", "<op>.rejected")``."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from lightmem.errors import InvalidInputError
from lightmem.ledger import Ledger, UsageRecord
from lightmem.llm.base import InvalidReply
from lightmem.sanitize import check_value

__all__ = ["T", "Unstorable", "count_rejected", "set_aside", "stored"]

T = TypeVar("T")
log = logging.getLogger("lightmem.llm")


class Unstorable(InvalidReply):
    """A field of the answer holds text the store refuses (a NUL, a lone surrogate)."""


def stored(value: T, where: str) -> T:
    """``value`` (a string, or a list, dict or dataclass of them) as the model gave it, or
    :class:`Unstorable` naming the field (``facts[0].fact: contains a NUL character``)."""
    try:
        check_value(value, where, strict=False)
    except InvalidInputError as exc:
        raise Unstorable(str(exc)) from exc
    return value


@contextmanager
def set_aside(item: Any, rejected: list[Any] | None) -> Iterator[None]:
    """Wraps the reading of one ``item`` of an answer. Without ``rejected`` an
    :class:`Unstorable` field refuses the whole answer, so the model repairs it; with
    ``rejected`` (the last allowed answer) the item goes there and the rest of the block,
    which keeps it, is skipped. Other refusals (a wrong shape) always refuse the answer."""
    try:
        yield
    except Unstorable as exc:
        if rejected is None:
            raise
        log.warning("LLM answer item set aside: %s", exc)
        rejected.append(item)


def count_rejected(ledger: Ledger, op: str, rejected: Sequence[object]) -> None:
    """Count the items of ``op``'s last answer that were dropped, as ``("llm",
    "<op>.rejected")``."""
    if rejected:
        log.warning("LLM %s: %d items of the last answer rejected", op, len(rejected))
        ledger.record(UsageRecord("llm", f"{op}.rejected", items=len(rejected)))

"""Model text on its way into the store: held to :mod:`lightmem.sanitize`'s check of
stored text, but refused as :class:`~lightmem.llm.base.InvalidReply`, so the client asks the
model to repair its answer instead of the store (or the user's input) taking the blame."""

from __future__ import annotations

from typing import TypeVar

from lightmem.errors import InvalidInputError
from lightmem.llm.base import InvalidReply
from lightmem.sanitize import check_value

__all__ = ["T", "stored"]

T = TypeVar("T")


def stored(value: T, where: str) -> T:
    """``value`` (a string, or a list, dict or dataclass of them) as the model gave it, or
    :class:`InvalidReply` naming the field (``facts[0].fact: contains a NUL character``)."""
    try:
        check_value(value, where, strict=False)
    except InvalidInputError as exc:
        raise InvalidReply(str(exc)) from exc
    return value

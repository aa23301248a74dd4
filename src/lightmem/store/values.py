"""Value types the store interfaces speak (a leaf module: no other store import)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from lightmem.types import Message, Scope

__all__ = [
    "DEFAULT_EF_SEARCH",
    "BufferedMessage",
    "MessageStatus",
    "PendingEntry",
    "ScoredId",
    "Vector",
]

MessageStatus = Literal["pending", "segmented", "extracted"]
ScoredId = tuple[str, float]
Vector = npt.NDArray[np.float32]
#: PostgreSQL's HNSW search breadth unless configured: the lowest that kept recall@10 >= 0.95
#: on every 1M build measured (README "Storage backends"); the config edge and the store
#: both default to it.
DEFAULT_EF_SEARCH = 128


@dataclass(frozen=True, slots=True)
class BufferedMessage:
    """A persisted message with its place in the sensory / short-term buffers."""

    seq: int
    scope: Scope
    message: Message
    compressed: str
    status: MessageStatus
    topic_id: str


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """An extracted entry the offline update has to bring up to date at a stage."""

    rid: int  # its row, the order it was stored in
    id: str
    #: the entry is new or changed since it was checked (what it is to later entries may
    #: have changed too); else only its check is out of date (made under another updater
    #: or code, or an earlier entry like it moved)
    moved: bool
    updated_at: float  # when it last changed (epoch seconds)

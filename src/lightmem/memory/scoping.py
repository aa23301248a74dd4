"""What a call's scope means, checked once for every method of the facade.

The rule (README, "Scopes"): a read that returns memories (``retrieve``,
``retrieve_context``, ``list_entries``) without a ``user_id`` is refused while the store
holds memories of more than one user (the unscoped user, ``''``, counts as one), unless
the caller asks for every user with ``all_scopes=True``. A store with one user (or none)
reads as before. Summaries are written per exact scope (never across users), and
operations that name an entry by id act on that entry whatever its user; given a
``user_id`` they also check that the entry is that user's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from lightmem import validate
from lightmem.errors import InvalidInputError
from lightmem.store.base import MemoryStore
from lightmem.store.provisional import is_provisional
from lightmem.types import Scope

__all__ = ["P", "R", "S", "check_editable", "read_scope", "serialised"]

P = ParamSpec("P")
R = TypeVar("R")


class _Locked(Protocol):
    write_lock: threading.RLock


S = TypeVar("S", bound=_Locked)


def serialised(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Run ``method`` holding the instance's ``write_lock`` (one writer at a time: they
    share the pipeline's buffers; reads do not take it)."""

    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.write_lock:
            return method(self, *args, **kwargs)

    functools.update_wrapper(wrapper, method)
    return wrapper


def read_scope(
    store: MemoryStore,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    all_scopes: bool,
) -> Scope:
    """The scope of a read returning memories, refused when it would mix users unasked."""
    scope = validate.scope(user_id, agent_id, run_id)
    validate.flag("all_scopes", all_scopes)
    if all_scopes:
        if scope.label() != "default":
            raise InvalidInputError(
                "all_scopes: reads every scope; do not combine it with user_id, agent_id or run_id"
            )
        return scope
    if not scope.user_id:
        users = store.user_ids(3)  # two are named; a third says there are more
        if len(users) > 1:
            shown = ", ".join(repr(u) if u else "memories without a user_id" for u in users[:2])
            more = ", ..." if len(users) > 2 else ""
            raise InvalidInputError(
                f"user_id: this store holds memories of several users ({shown}{more}); give "
                "user_id to read one user's memories, or all_scopes=True to read every user's"
            )
    return scope


def check_editable(entry_id: str) -> None:
    """Refuse an edit of a provisional entry (a buffered turn's stand-in)."""
    if is_provisional(entry_id):
        raise InvalidInputError(
            f"id: {entry_id!r} is a provisional entry (its turn is not extracted yet); "
            "flush its scope first (Python: flush(); REST: POST /v1/flush; MCP: the flush "
            "tool; CLI: add without --no-flush) and edit the extracted entry, or purge it"
        )

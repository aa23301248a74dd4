"""Which scopes a store holds, read from the entries' scope index (a few index seeks)."""

from __future__ import annotations

from lightmem.store.db import Session

__all__ = ["distinct_users"]


def distinct_users(s: Session, limit: int) -> list[str]:
    """Up to ``limit`` distinct ``user_id`` values of the entries, in order ('' is the
    unscoped user). Each is one ``min()`` over the index on ``(user_id, ...)``, so asking
    "one user or several?" costs two seeks whatever the store's size."""
    users: list[str] = []
    while len(users) < limit:
        if users:
            row = s.one("SELECT min(user_id) FROM entries WHERE user_id > ?", (users[-1],))
        else:
            row = s.one("SELECT min(user_id) FROM entries")
        if row is None or row[0] is None:
            break
        users.append(str(row[0]))
    return users

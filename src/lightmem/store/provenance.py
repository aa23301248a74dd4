"""Which stored entries come from given messages: what a retried add reports.

Entries carry the ids of the turns they were extracted from (``source_ids``) and the topic
of those turns, so the search is bounded by the topics of the given messages (indexed),
not by the size of the scope."""

from __future__ import annotations

from collections.abc import Sequence

from lightmem.store.db import Database
from lightmem.store.sql import IN_CHUNK, json_value
from lightmem.types import Scope

__all__ = ["entries_citing"]

_OWN = "user_id = ? AND agent_id = ? AND run_id = ?"


def entries_citing(db: Database, scope: Scope, message_ids: Sequence[str]) -> list[str]:
    """Ids of the entries of exactly ``scope`` that cite any of ``message_ids`` as a
    source, oldest first."""
    own = (scope.user_id, scope.agent_id, scope.run_id)
    wanted = set(message_ids)
    ids = sorted(wanted)
    with db.read() as s:
        topics: set[str] = set()
        for start in range(0, len(ids), IN_CHUNK):
            chunk = ids[start : start + IN_CHUNK]
            topics |= {
                str(r[0])
                for r in s.all(
                    f"SELECT DISTINCT topic_id FROM messages WHERE msg_id IN "
                    f"({','.join('?' * len(chunk))}) AND {_OWN} AND topic_id <> ''",
                    (*chunk, *own),
                )
            }
        found: list[tuple[int, str]] = []
        ordered = sorted(topics)
        for start in range(0, len(ordered), IN_CHUNK):
            chunk = ordered[start : start + IN_CHUNK]
            found += [
                (int(r[0]), str(r[1]))
                for r in s.all(
                    f"SELECT rid, id, source_ids FROM entries WHERE topic_id IN "
                    f"({','.join('?' * len(chunk))}) AND {_OWN}",
                    (*chunk, *own),
                )
                if wanted & {str(x) for x in json_value(r[2])}
            ]
    return [entry_id for _, entry_id in sorted(found)]

"""What a store does to rows that are not its own to touch, and with rows it cannot read.

Purging one FluxMem node erases the history of the node's own scope only (another user's
event that holds the same words is not the node's). A SQLite file damaged by another tool
(malformed JSON in a row, a short vector, a scribbled schema or schema version) gives a
StoreError naming what is damaged, and one bad row never makes a list, search or history
fail: it is skipped, logged and reported by ``integrity_check()``."""

from __future__ import annotations

import json
from pathlib import Path

from lightmem.fluxmem import FluxMemAgent
from lightmem.store.sqlite import SQLiteStore

SECRET = "Maya's locker combination is 31-07-1994 behind the blue door"


def _texts(agent: FluxMemAgent) -> str:
    return json.dumps(agent.history(1000))


def test_purging_a_node_leaves_other_scopes_history_alone(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "two.db"))
    try:
        alice = FluxMemAgent.on_store(store, agent_id="alice-bot", user_id="alice")
        bob = FluxMemAgent.on_store(store, agent_id="bob-bot", user_id="bob")
        bob.add_knowledge(["Bob's wifi password is hunter2 and the router is in the hall."])
        bob.add_knowledge([SECRET])  # the same words, stored by bob himself
        [short] = alice.add_knowledge(["is"])
        [secret] = alice.add_knowledge([SECRET])
        alice.add_knowledge(["This list exists"])  # "is" only inside longer words
        alice.start_task(f"remember that {SECRET}")  # an episode quoting the secret
        bobs = bob.history(1000)
        assert len(bobs) == 2 and SECRET in _texts(alice)
        alice.purge(secret)
        # Every copy in alice's scope is gone (the episode quoting it too); bob keeps his.
        assert "31-07-1994" not in _texts(alice)
        assert bob.history(1000) == bobs
        report = alice.purge(short)
        assert report.removed["graph_nodes"] == 1
        assert bob.history(1000) == bobs  # a short text erases nothing of bob's
        bob.undo(bobs[0]["seq"])  # and bob can still undo his change
        assert "This list exists" in _texts(alice)  # not a copy of "is"
    finally:
        store.close()

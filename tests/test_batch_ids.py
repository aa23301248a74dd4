"""Ids of id-less turns added in batches (``lightmem add --batch``): each keeps the id of its
place in its batch, which is what a file added in batches by earlier versions stored, so
re-adding it stores nothing twice; only a turn repeated at the same place of two batches
takes the id of its place in the file, so the repeat is kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inprocess_cli import run
from lightmem import InvalidInputError, LightMemory
from lightmem.pipeline.messages import assign_ids, normalize_messages

CONVERSATION = [
    {"role": "user", "content": "I moved to Porto in May."},
    {"role": "assistant", "content": "Noted: you live in Porto."},
    {"role": "user", "content": "thanks"},
    {"role": "assistant", "content": "Booked the flight."},
    {"role": "user", "content": "thanks"},  # the same place of its batch as the first
    {"role": "assistant", "content": "Booked the hotel too."},
]


def test_ids_are_those_of_each_place_in_its_batch_but_for_a_repeat() -> None:
    batches = [CONVERSATION[i : i + 2] for i in range(0, 6, 2)]
    per_batch = [m.id for b in batches for m in normalize_messages(b)]  # what add_memory gives
    ids = [m["id"] for m in assign_ids(CONVERSATION, batch=2)]
    assert ids[:4] == per_batch[:4] and ids[5] == per_batch[5]
    assert per_batch[4] == per_batch[2]  # batch by batch, the second "thanks" was a retry
    assert ids[4] not in ids[:4] and ids[4] == normalize_messages(CONVERSATION)[4].id
    whole = [m["id"] for m in assign_ids(CONVERSATION)]
    assert whole == [m.id for m in normalize_messages(CONVERSATION)]
    with pytest.raises(InvalidInputError, match="batch"):
        assign_ids(CONVERSATION, batch=0)


def test_a_file_added_in_batches_before_is_not_stored_again(tmp_path: Path) -> None:
    store = tmp_path / "m.db"
    with LightMemory.from_config({"store": {"path": str(store)}}) as mem:
        for i in range(0, 6, 2):  # how earlier versions sent a file: batch by batch
            mem.add_memory(CONVERSATION[i : i + 2])
        assert mem.stats()["messages"] == 5  # the repeated "thanks" was taken for a retry
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps(CONVERSATION))
    again = run("--store", str(store), "add", str(conv), "--batch", "2", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["messages_added"] == 1  # only the repeat, now kept
    third = run("--store", str(store), "add", str(conv), "--batch", "2", "--json")
    assert json.loads(third.stdout)["messages_added"] == 0

"""The LLM updater: one call decides update / delete / ignore for a batch of pairs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from lightmem.llm.base import ChatMessage, LLMClient
from lightmem.llm.packing import cut_reported
from lightmem.llm.schema import OutputSchema
from lightmem.pipeline.prompts import update as update_prompt
from lightmem.pipeline.prompts import update_schema
from lightmem.pipeline.prompts.reply import count_rejected
from lightmem.pipeline.update import UpdateAction, UpdateItem
from lightmem.types import MemoryEntry

__all__ = ["LLMUpdater"]

_Pair = tuple[MemoryEntry, list[MemoryEntry]]


class LLMUpdater:
    """Asks the model about ``pairs_per_call`` (newer, earlier) pairs at a time. The model's
    answers are proposals: ``run_update`` refuses any that names an entry outside the batch.

    Answers follow a bounded schema naming only the batch's earlier ids. An action holding
    text the store refuses is sent back for repair; on the last allowed answer only that
    action is dropped, counted as ``("llm", "update.rejected")``. With the client's
    ``context_tokens``, a batch is split over several calls where one request would not fit,
    and a memory text too long for any request is cut in the prompt (not in the store).
    """

    name = "llm"

    def __init__(self, client: LLMClient, *, pairs_per_call: int = 20) -> None:
        self.client = client
        self.pairs_per_call = pairs_per_call

    def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        actions: list[UpdateAction] = []
        for chunk in self._chunks([(it.newer, [e for e, _ in it.candidates]) for it in items]):
            messages, output = self._request(chunk)
            rejected: list[Any] = []
            answers = self.client.complete_json(
                messages,
                update_prompt.parse,
                final_parse=partial(update_prompt.parse, rejected=rejected),
                op="update",
                output=output,
            )
            count_rejected(self.client.ledger, "update", rejected)
            newer_of = {e.id: n for n, earlier in chunk for e in earlier}
            actions += [x for a in answers if (x := _action(a, newer_of)) is not None]
        return actions

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        """None: the model decides supersessions in :meth:`decide`'s batches."""
        return []

    def _request(self, pairs: Sequence[_Pair]) -> tuple[list[ChatMessage], OutputSchema]:
        ids = [e.id for _, earlier in pairs for e in earlier]
        newer = [n.id for n, _ in pairs]
        output = update_schema.output(ids, self.client.answer_limit(), newer)
        return update_prompt.build(pairs), output

    def _fits(self, pairs: Sequence[_Pair]) -> bool:
        return self.client.fits(*self._request(pairs))

    def _chunks(self, pairs: Sequence[_Pair]) -> list[list[_Pair]]:
        """Consecutive requests that each fit; one pair per earlier memory when even a whole
        pair is too long, with texts cut as a last resort."""
        out: list[list[_Pair]] = []
        for newer, earlier in pairs:
            for pair in self._split(newer, earlier):
                if out and self._fits([*out[-1], pair]):
                    out[-1].append(pair)
                else:
                    out.append([pair])
        return out

    def _split(self, newer: MemoryEntry, earlier: list[MemoryEntry]) -> list[_Pair]:
        if self._fits([(newer, earlier)]):
            return [(newer, earlier)]
        out = []
        for e in earlier:
            pair = (newer, [e])
            if not self._fits([pair]):
                pair = self._cut(newer, e)
            out.append(pair)
        return out

    def _cut(self, newer: MemoryEntry, earlier: MemoryEntry) -> _Pair:
        def pair(texts: Sequence[str]) -> _Pair:
            return replace(newer, text=texts[0]), [replace(earlier, text=texts[1])]

        def fits(texts: list[str]) -> bool:
            return self._fits([pair(texts)])

        return pair(cut_reported(self.client, "update", [newer.text, earlier.text], fits))


def _action(answer: dict[str, str], newer_of: dict[str, MemoryEntry]) -> UpdateAction | None:
    """One answer as an action. A merge without text removes the earlier memory as a
    repeat of the newer one it was paired with (kept in its history); a supersede names
    its newer memory (checked against the batch by ``run_update``)."""
    reason = f"llm ({update_prompt.VERSION})"
    eid, act = answer["id"], answer["action"]
    if act == "supersede":
        return UpdateAction("supersede", eid, reason, by=answer["by"])
    if act == "merge" and answer["text"]:
        return UpdateAction("update", eid, reason, new_text=answer["text"])
    if act == "merge":
        newer = newer_of.get(eid)
        return UpdateAction("delete", eid, f"{reason}: repeats {newer.id}" if newer else reason)
    return None

"""The LLM updater: one call decides update / delete / ignore for a batch of pairs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from lightmem.ledger import Ledger
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
    """Asks the model about ``pairs_per_call`` (newer, earlier) pairs at a time: in
    :meth:`decide` about the queued pairs above the update's score threshold (keep,
    supersede or merge), in :meth:`review` about each entry's nearest earlier ones with no
    threshold (keep or supersede). The model's answers are proposals: ``run_update``
    refuses any that names an entry outside the batch.

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

    @property
    def signature(self) -> str:
        """Its model (by the client's name), and what shapes its prompts: the batch size
        and the context that decides what is cut."""
        return (
            f"llm model={self.client.name} pairs={self.pairs_per_call} "
            f"context={self.client.context_tokens}"
        )

    @property
    def ledger(self) -> Ledger:
        """Its client's ledger: where its model calls are accounted."""
        return self.client.ledger

    def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        return self._ask([(it.newer, [e for e, _ in it.candidates]) for it in items], True)

    def review(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        """Supersessions among each newer entry's nearest earlier ones, however similar
        (a changed value is often far from the old one: "I live in Leeds" / "we finally
        got the keys in Bristol"), asking keep or supersede only; a pair :meth:`decide`
        was already asked about in this pass (``decided``) and an earlier entry already
        replaced are not asked again. ``pairs_per_call`` pairs a batch, each batch split
        over calls that fit the context like :meth:`decide`'s."""
        batches: list[list[_Pair]] = [[]]
        size = 0
        for it in items:
            earlier = [
                e for e, _ in it.candidates if e.id not in it.decided and not e.superseded_by
            ]
            if not earlier:
                continue
            if size and size + len(earlier) > self.pairs_per_call:
                batches.append([])
                size = 0
            batches[-1].append((it.newer, earlier))
            size += len(earlier)
        # keep / supersede only were asked; anything else a model answers is not applied
        # (a defer is no answer: the item is shown again)
        asked = (a for b in batches if b for a in self._ask(b, False))
        return [a for a in asked if a.op in ("supersede", "defer")]

    def _ask(self, pairs: Sequence[_Pair], merge: bool) -> list[UpdateAction]:
        """The model's actions on ``pairs``, over as many calls as fit the context."""
        actions: list[UpdateAction] = []
        for chunk in self._chunks(pairs, merge):
            messages, output = self._request(chunk, merge)
            rejected: list[Any] = []
            answers = self.client.complete_json(
                messages,
                update_prompt.parse,
                final_parse=partial(update_prompt.parse, rejected=rejected),
                op="update" if merge else "update.review",
                output=output,
            )
            count_rejected(self.client.ledger, "update", rejected)
            newer_of = {e.id: n for n, earlier in chunk for e in earlier}
            actions += [x for a in answers if (x := _action(a, newer_of)) is not None]
            # an answer dropped is no decision: its newer memory is shown again next pass
            dropped = {n.id for a in rejected if (n := _newer(a, newer_of)) is not None}
            actions += [UpdateAction("defer", i, "answer refused") for i in sorted(dropped)]
        return actions

    def _request(
        self, pairs: Sequence[_Pair], merge: bool = True
    ) -> tuple[list[ChatMessage], OutputSchema]:
        ids = [e.id for _, earlier in pairs for e in earlier]
        newer = [n.id for n, _ in pairs]
        output = update_schema.output(ids, self.client.answer_limit(), newer, merge=merge)
        return update_prompt.build(pairs, merge=merge), output

    def _fits(self, pairs: Sequence[_Pair], merge: bool) -> bool:
        return self.client.fits(*self._request(pairs, merge))

    def _chunks(self, pairs: Sequence[_Pair], merge: bool) -> list[list[_Pair]]:
        """Consecutive requests that each fit; one pair per earlier memory when even a whole
        pair is too long, with texts cut as a last resort."""
        out: list[list[_Pair]] = []
        for newer, earlier in pairs:
            for pair in self._split(newer, earlier, merge):
                if out and self._fits([*out[-1], pair], merge):
                    out[-1].append(pair)
                else:
                    out.append([pair])
        return out

    def _split(self, newer: MemoryEntry, earlier: list[MemoryEntry], merge: bool) -> list[_Pair]:
        if self._fits([(newer, earlier)], merge):
            return [(newer, earlier)]
        out = []
        for e in earlier:
            pair = (newer, [e])
            if not self._fits([pair], merge):
                pair = self._cut(newer, e, merge)
            out.append(pair)
        return out

    def _cut(self, newer: MemoryEntry, earlier: MemoryEntry, merge: bool) -> _Pair:
        def pair(texts: Sequence[str]) -> _Pair:
            return replace(newer, text=texts[0]), [replace(earlier, text=texts[1])]

        def fits(texts: list[str]) -> bool:
            return self._fits([pair(texts)], merge)

        return pair(cut_reported(self.client, "update", [newer.text, earlier.text], fits))


def _newer(answer: object, newer_of: dict[str, MemoryEntry]) -> MemoryEntry | None:
    """The newer memory a dropped answer (as the model gave it) was about."""
    eid = answer.get("id") if isinstance(answer, dict) else None
    return newer_of.get(eid) if isinstance(eid, str) else None


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

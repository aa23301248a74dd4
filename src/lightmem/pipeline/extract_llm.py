"""The LLM memory manager: batched extraction of attributed facts (LightMem flat mode)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from lightmem.ledger import UsageRecord
from lightmem.llm.base import LLMClient
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.pipeline.extract import Draft, IdFactory, Segment, topic_summary
from lightmem.pipeline.prompts import extract_event, extract_flat
from lightmem.store.base import BufferedMessage
from lightmem.text import estimate_tokens
from lightmem.timeparse import format_date
from lightmem.types import MemoryEntry

log = logging.getLogger("lightmem.extract")


class LLMMemoryManager:
    """Extraction by an LLM, ``mode`` "flat" (LightMem: independent facts) or "event"
    (StructMem: events binding their facts, with cause, effect, participants and
    relations to other events; facts carry ``metadata["event_id"]``).

    Sends whole topic segments, packed into batches of about ``batch_tokens`` (of the
    pre-compressed text the model sees), to one extraction call per batch.

    Ids, timestamps and speakers of a fact are taken from the turns it cites, never from
    the model. A reply citing a turn outside its batch is sent back for correction; if the
    last allowed reply still does, those facts are rejected and counted in the ledger as
    ``("llm", "extract.rejected")``.
    """

    name = "llm"

    def __init__(
        self,
        client: LLMClient,
        keyword_scorer: EntropyCompressor,
        *,
        batch_tokens: int = 2048,
        summary_keywords: int = 12,
        mode: Literal["flat", "event"] = "flat",
    ) -> None:
        self.client = client
        self.mode = mode
        self._scorer = keyword_scorer
        self._batch_tokens = batch_tokens
        self._k = summary_keywords

    def extract(self, segments: Sequence[Segment], new_id: IdFactory) -> list[Draft]:
        now = datetime.now(UTC)
        drafts: list[Draft] = []
        for batch in self._batches(segments):
            drafts.extend(self._extract_batch(batch, new_id, now))
        drafts.extend(topic_summary(s, self._scorer, self._k, new_id(), now) for s in segments)
        return drafts

    def _batches(self, segments: Sequence[Segment]) -> list[list[Segment]]:
        batches: list[list[Segment]] = []
        size = 0
        for seg in segments:
            cost = sum(estimate_tokens(b.compressed) for b in seg.messages)
            if batches and size + cost <= self._batch_tokens:
                batches[-1].append(seg)
                size += cost
            else:
                batches.append([seg])
                size = cost
        return batches

    def _extract_batch(
        self, batch: Sequence[Segment], new_id: IdFactory, now: datetime
    ) -> list[Draft]:
        turns: dict[str, tuple[BufferedMessage, Segment]] = {
            b.message.id: (b, seg) for seg in batch for b in seg.messages
        }
        lines = [
            extract_flat.Turn(
                b.message.id, b.message.speaker, format_date(b.message.timestamp), b.compressed
            )
            for b, _ in turns.values()
        ]
        allowed = set(turns)
        builder = _FactBuilder(turns, new_id, now)
        if self.mode == "flat":
            flat = self.client.complete_json(
                extract_flat.build(lines),
                lambda obj: extract_flat.parse(obj, allowed, strict=True),
                final_parse=lambda obj: extract_flat.parse(obj, allowed),
                op="extract",
            )
            self._count_rejected(flat.rejected)
            return [builder.draft(f, {"extractor": extract_flat.VERSION}) for f in flat.facts]
        ev = self.client.complete_json(
            extract_flat.build(lines, extract_event.SYSTEM),
            lambda obj: extract_event.parse(obj, allowed, strict=True),
            final_parse=lambda obj: extract_event.parse(obj, allowed),
            op="extract",
        )
        self._count_rejected(ev.rejected)
        ids = {e.key: new_id() for e in ev.events}
        drafts: list[Draft] = []
        for event in ev.events:
            facts = [
                builder.draft(f, {"extractor": extract_event.VERSION, "event_id": ids[event.key]})
                for f in event.facts
            ]
            relations = [
                {"type": typ, "to": ids[dst]} for src, dst, typ in ev.relations if src == event.key
            ]
            sources = tuple(dict.fromkeys(s for d in facts for s in d.entry.source_ids))
            first = min(
                (d.entry for d in facts if d.entry.timestamp),
                key=lambda e: e.timestamp or now,
                default=None,
            )
            detail = "; ".join(
                x
                for x in (
                    f"participants: {', '.join(event.participants)}" if event.participants else "",
                    f"cause: {event.cause}" if event.cause else "",
                    f"effect: {event.effect}" if event.effect else "",
                )
                if x
            )
            drafts.append(
                Draft(
                    MemoryEntry(
                        id=ids[event.key],
                        kind="event",
                        text=event.summary,
                        original_text=f"{event.summary} ({detail})" if detail else event.summary,
                        scope=facts[0].entry.scope,
                        timestamp=first.timestamp if first else None,
                        topic_id=facts[0].entry.topic_id,
                        source_ids=sources,
                        context="\n".join(d.entry.text for d in facts),
                        created_at=now,
                        updated_at=now,
                        metadata={
                            "extractor": extract_event.VERSION,
                            "time": event.time,
                            "participants": list(event.participants),
                            "cause": event.cause,
                            "effect": event.effect,
                            "relations": relations,
                        },
                    ),
                    None,
                )
            )
            drafts.extend(facts)
        return drafts

    def _count_rejected(self, rejected: Sequence[object]) -> None:
        if rejected:
            log.warning("rejected %d facts citing turns outside their batch", len(rejected))
            self.client.ledger.record(UsageRecord("llm", "extract.rejected", items=len(rejected)))


class _FactBuilder:
    """Turns a cited fact into an entry whose ids, time and speaker come from its turns."""

    def __init__(
        self,
        turns: dict[str, tuple[BufferedMessage, Segment]],
        new_id: IdFactory,
        now: datetime,
    ) -> None:
        self._turns = turns
        self._order = {mid: i for i, mid in enumerate(turns)}
        self._new_id = new_id
        self._now = now

    def draft(self, fact: extract_flat.Fact, metadata: dict[str, object]) -> Draft:
        ids = sorted(fact.source_ids, key=self._order.__getitem__)
        sources = [self._turns[i][0].message for i in ids]
        seg = self._turns[ids[0]][1]
        speakers = {m.speaker for m in sources}
        first = sources[0]
        one = len(speakers) == 1
        return Draft(
            MemoryEntry(
                id=self._new_id(),
                text=fact.text,
                original_text=fact.text,
                scope=seg.scope,
                timestamp=next((m.timestamp for m in sources if m.timestamp), None),
                speaker_id=(first.speaker_id or first.role) if one else "",
                speaker_name=first.speaker_name if one else "",
                topic_id=seg.topic_id,
                source_ids=tuple(ids),
                context="\n".join(m.content for m in sources),
                created_at=self._now,
                updated_at=self._now,
                metadata=metadata,
            ),
            None,
        )

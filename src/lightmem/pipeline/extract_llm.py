"""The LLM memory manager: batched extraction of attributed facts (LightMem flat mode)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from lightmem.ledger import UsageRecord
from lightmem.llm.base import LLMClient
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.pipeline.extract import Draft, IdFactory, Segment, topic_summary
from lightmem.pipeline.prompts import extract_flat
from lightmem.pipeline.timeparse import format_date
from lightmem.store.base import BufferedMessage
from lightmem.text import estimate_tokens
from lightmem.types import MemoryEntry

log = logging.getLogger("lightmem.extract")


class LLMMemoryManager:
    """Sends whole topic segments, packed into batches of about ``batch_tokens`` (of the
    pre-compressed text the model sees), to one extraction call per batch.

    Ids, timestamps and speakers of a fact are taken from the turns it cites, never from
    the model; a fact citing a turn outside its batch is rejected and counted in the
    ledger as ``("llm", "extract.rejected")``.
    """

    name = "llm"

    def __init__(
        self,
        client: LLMClient,
        keyword_scorer: EntropyCompressor,
        *,
        batch_tokens: int = 2048,
        summary_keywords: int = 12,
    ) -> None:
        self.client = client
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
        prompt = extract_flat.build(
            [
                extract_flat.Turn(
                    b.message.id, b.message.speaker, format_date(b.message.timestamp), b.compressed
                )
                for b, _ in turns.values()
            ]
        )
        result = self.client.complete_json(
            prompt, lambda obj: extract_flat.parse(obj, set(turns)), op="extract"
        )
        if result.rejected:
            log.warning("rejected %d facts citing turns outside their batch", len(result.rejected))
            self.client.ledger.record(
                UsageRecord("llm", "extract.rejected", items=len(result.rejected))
            )
        order = {mid: i for i, mid in enumerate(turns)}
        drafts = []
        for fact in result.facts:
            ids = sorted(fact.source_ids, key=order.__getitem__)
            sources = [turns[i][0].message for i in ids]
            speakers = {m.speaker for m in sources}
            first = sources[0]
            drafts.append(
                Draft(
                    MemoryEntry(
                        id=new_id(),
                        text=fact.text,
                        original_text=fact.text,
                        scope=turns[ids[0]][1].scope,
                        timestamp=next((m.timestamp for m in sources if m.timestamp), None),
                        speaker_id=(first.speaker_id or first.role) if len(speakers) == 1 else "",
                        speaker_name=first.speaker_name if len(speakers) == 1 else "",
                        topic_id=turns[ids[0]][1].topic_id,
                        source_ids=tuple(ids),
                        context="\n".join(m.content for m in sources),
                        created_at=now,
                        updated_at=now,
                        metadata={"extractor": extract_flat.VERSION},
                    ),
                    None,
                )
            )
        return drafts

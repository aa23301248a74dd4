"""The LLM memory manager: batched extraction of attributed facts (LightMem flat mode)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

from lightmem.ledger import Ledger, UsageRecord
from lightmem.llm.base import ChatMessage, LLMClient, UnusableOutputError
from lightmem.llm.packing import cut_reported
from lightmem.llm.schema import OutputSchema
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.pipeline.extract import Draft, IdFactory, OfflineMemoryManager, Segment, topic_summary
from lightmem.pipeline.prompts import (
    extract_event,
    extract_event_schema,
    extract_flat,
    extract_flat_schema,
)
from lightmem.pipeline.prompts.reply import count_rejected
from lightmem.sanitize import inline
from lightmem.store.base import BufferedMessage
from lightmem.text import estimate_tokens
from lightmem.timeparse import format_date
from lightmem.timeresolve import Mention, find_times, resolve
from lightmem.timespan import TimeSpan, parse_iso_span
from lightmem.types import MemoryEntry, Message

__all__ = ["FALLBACK", "TIME_HINTS", "LLMMemoryManager"]

log = logging.getLogger("lightmem.extract")

#: what the offline fallback writes into an entry's ``metadata["extractor"]``
FALLBACK = "offline-fallback"


#: Times of a turn resolved by the rules and shown to the model beside it, at most.
TIME_HINTS = 16


@dataclass(frozen=True, slots=True)
class _Turn:
    """A turn in a batch: its message, its segment and row there, the prompt text, and
    the first :data:`TIME_HINTS` times it names (read once: the prompt is built again for
    every packing test, and every fact citing the turn looks for its time's words there)."""

    buffered: BufferedMessage
    segment: Segment
    row: int
    text: str
    times: tuple[Mention, ...]

    @property
    def id(self) -> str:
        return self.buffered.message.id


def _hint(t: _Turn) -> str:
    """The times a turn names, resolved by the rules, for the model to check and use."""
    pairs = "; ".join(
        f"{inline(x.phrase)} = {x.span.iso()}" for x in t.times if isinstance(x.span, TimeSpan)
    )
    return f" [times: {pairs}]" if pairs else ""


class LLMMemoryManager:
    """Extraction by an LLM, ``mode`` "flat" (LightMem: independent facts) or "event"
    (StructMem: events binding their facts, with cause, effect, participants and
    relations to other events; facts carry ``metadata["event_id"]``).

    Sends topic segments, packed into batches of about ``batch_tokens`` (of the
    pre-compressed text the model sees), to one extraction call per batch, with a bounded
    JSON schema (at most ``max_facts`` facts or events, citing only the batch's turn ids).
    With the client's ``context_tokens``, a batch also stops where the request would no
    longer fit (a segment is then split), and a single turn too long for it is cut in the
    prompt (the stored message stays whole).

    Ids, timestamps and speakers of a fact are taken from the turns it cites, never from
    the model. A reply citing a turn outside its batch, or holding text the store refuses (a
    NUL, a lone surrogate), is sent back for correction; if the last allowed reply still
    does, only those facts (or events, for an event's own field) are rejected and counted in
    the ledger as ``("llm", "extract.rejected")``.

    No turn is left without a memory: every turn of a batch that no accepted fact cites
    (the answer was unusable, cited only unknown turns, or skipped it) gets the offline
    per-turn entry instead, with ``metadata["extractor"] == "offline-fallback"``, counted
    as ``("llm", "extract.fallback")`` items. Transport failures still raise
    :class:`~lightmem.errors.BackendError` and leave the turns pending for a retry.

    Each fact's ``event_time`` is the time the model resolved for it (see
    :data:`~lightmem.pipeline.prompts.extract_flat.TIME_RULE`); when the model gives none,
    or one that is no ISO date, the offline rules of :mod:`lightmem.timeresolve` resolve the
    fact's text, then its turns, against the turns' time (a time the model wrote that could
    not be read is counted as ``("llm", "extract.unread_time")``). ``resolve_time=False``
    keeps no resolved time.

    ``roles`` (None: every role) are the roles whose turns are extracted, as for the
    offline manager: turns of other roles are neither sent to the model nor given an entry
    (topic summaries still cover the whole segment). The default ``fallback`` follows the
    same roles; :func:`lightmem.memory.build.llm_manager` builds both from the settings.
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
        max_facts: int = 12,
        fallback: OfflineMemoryManager | None = None,
        resolve_time: bool = True,
        roles: frozenset[str] | None = None,
    ) -> None:
        self.client = client
        self.mode = mode
        self._scorer = keyword_scorer
        self._batch_tokens = batch_tokens
        self._k = summary_keywords
        self._max_facts = max(1, max_facts)
        self._resolve_time = resolve_time
        self._roles = roles
        self._fallback = fallback or OfflineMemoryManager(
            keyword_scorer,
            summary_keywords=summary_keywords,
            roles=roles,
            resolve_time=resolve_time,
        )

    @property
    def ledger(self) -> Ledger:
        """Its client's ledger: where its model calls are accounted."""
        return self.client.ledger

    @property
    def _system(self) -> str:
        return extract_flat.SYSTEM if self.mode == "flat" else extract_event.SYSTEM

    def extract(self, segments: Sequence[Segment], new_id: IdFactory) -> list[Draft]:
        now = datetime.now(UTC)
        drafts: list[Draft] = []
        for batch in self._batches(segments):
            drafts.extend(self._extract_batch(batch, new_id, now))
        drafts.extend(topic_summary(s, self._scorer, self._k, new_id(), now) for s in segments)
        return drafts

    # -- packing ------------------------------------------------------------------------------
    def _request(self, batch: Sequence[_Turn]) -> tuple[list[ChatMessage], OutputSchema]:
        lines = [
            extract_flat.Turn(
                t.id,
                t.buffered.message.speaker,
                format_date(t.buffered.message.timestamp),
                t.text + _hint(t),
            )
            for t in batch
        ]
        ids = [t.id for t in batch]
        limit = self.client.answer_limit()
        n = min(self._max_facts, len(batch))
        if self.mode == "flat":
            output = extract_flat_schema.output(ids, n, limit)
        else:
            output = extract_event_schema.output(ids, max(1, (n + 2) // 3), limit)
        return extract_flat.build(lines, self._system), output

    def _times(self, m: Message) -> tuple[Mention, ...]:
        """The first :data:`TIME_HINTS` times a turn names (none without ``resolve_time``)."""
        if not self._resolve_time:
            return ()
        return tuple(find_times(m.content, m.timestamp, limit=TIME_HINTS))

    def _fits(self, batch: Sequence[_Turn]) -> bool:
        return self.client.fits(*self._request(batch))

    def _batches(self, segments: Sequence[Segment]) -> list[list[_Turn]]:
        """Whole segments (their turns of ``roles``) up to ``batch_tokens``; within the
        context size, turn by turn."""
        batches: list[list[_Turn]] = []
        size = 0
        for seg in segments:
            kept = [
                _Turn(b, seg, row, b.compressed, self._times(b.message))
                for row, b in enumerate(seg.messages)
                if self._roles is None or b.message.role in self._roles
            ]
            if not kept:
                continue
            cost = sum(estimate_tokens(t.text) for t in kept)
            if not batches or size + cost > self._batch_tokens:
                batches.append([])
                size = 0
            size += cost
            for turn in kept:
                if batches[-1] and not self._fits([*batches[-1], turn]):
                    batches.append([])
                if not self._fits([turn]):
                    turn = self._cut(turn)
                batches[-1].append(turn)
        return [b for b in batches if b]

    def _cut(self, turn: _Turn) -> _Turn:
        """The turn with its prompt text cut to the longest that fits alone."""

        def fits(texts: list[str]) -> bool:
            return self._fits([replace(turn, text=texts[0])])

        return replace(turn, text=cut_reported(self.client, "extract", [turn.text], fits)[0])

    # -- one call -----------------------------------------------------------------------------
    def _extract_batch(
        self, batch: Sequence[_Turn], new_id: IdFactory, now: datetime
    ) -> list[Draft]:
        messages, output = self._request(batch)
        allowed = {t.id for t in batch}
        builder = _FactBuilder(batch, new_id, now, self._resolve_time)
        try:
            if self.mode == "flat":
                drafts = self._flat(messages, output, allowed, builder)
            else:
                drafts = self._events(messages, output, allowed, builder, new_id, now)
        except UnusableOutputError as exc:
            log.warning("extraction answer unusable (%s); using per-turn entries", exc)
            drafts = []
        if builder.unread_times:
            self.client.ledger.record(
                UsageRecord("llm", "extract.unread_time", items=builder.unread_times)
            )
        cited = {s for d in drafts for s in d.entry.source_ids}
        return drafts + self._fall_back([t for t in batch if t.id not in cited], new_id)

    def _flat(
        self,
        messages: list[ChatMessage],
        output: OutputSchema,
        allowed: set[str],
        builder: _FactBuilder,
    ) -> list[Draft]:
        flat = self.client.complete_json(
            messages,
            lambda obj: extract_flat.parse(obj, allowed, strict=True),
            final_parse=lambda obj: extract_flat.parse(obj, allowed),
            op="extract",
            output=output,
        )
        count_rejected(self.client.ledger, "extract", flat.rejected)
        return [builder.draft(f, {"extractor": extract_flat.VERSION}) for f in flat.facts]

    def _events(
        self,
        messages: list[ChatMessage],
        output: OutputSchema,
        allowed: set[str],
        builder: _FactBuilder,
        new_id: IdFactory,
        now: datetime,
    ) -> list[Draft]:
        ev = self.client.complete_json(
            messages,
            lambda obj: extract_event.parse(obj, allowed, strict=True),
            final_parse=lambda obj: extract_event.parse(obj, allowed),
            op="extract",
            output=output,
        )
        count_rejected(self.client.ledger, "extract", ev.rejected)
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
                        event_time=builder.time(
                            event.time,
                            "",
                            [] if first is None else [first.timestamp],
                            builder.messages(sources),
                        )
                        or next((d.entry.event_time for d in facts if d.entry.event_time), None),
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

    def _fall_back(self, turns: Sequence[_Turn], new_id: IdFactory) -> list[Draft]:
        """The offline per-turn entries of ``turns`` (grouped by segment, in order)."""
        if not turns:
            return []
        self.client.ledger.record(UsageRecord("llm", "extract.fallback", items=len(turns)))
        groups: dict[str, list[_Turn]] = {}
        for t in turns:
            groups.setdefault(t.segment.topic_id, []).append(t)
        drafts: list[Draft] = []
        for group in groups.values():
            seg = group[0].segment
            rows = [t.row for t in group]
            part = Segment(seg.topic_id, seg.scope, [t.buffered for t in group], seg.vectors[rows])
            for d in self._fallback.extract([part], new_id):
                if d.entry.kind == "entry":
                    meta = {**d.entry.metadata, "extractor": FALLBACK}
                    drafts.append(replace(d, entry=replace(d.entry, metadata=meta)))
        return drafts


class _FactBuilder:
    """Turns a cited fact into an entry whose ids, time and speaker come from its turns."""

    def __init__(
        self, turns: Sequence[_Turn], new_id: IdFactory, now: datetime, resolve_time: bool
    ) -> None:
        self._turns = {t.id: t for t in turns}
        self._order = {t.id: i for i, t in enumerate(turns)}
        self._new_id = new_id
        self._now = now
        self._resolve = resolve_time
        self._resolved: dict[str, TimeSpan | None] = {}
        self.unread_times = 0

    def time(
        self,
        stated: str,
        text: str,
        anchors: Sequence[datetime | None],
        turns: Sequence[Message] = (),
    ) -> TimeSpan | None:
        """The model's ISO time (with the words the text or a turn said it in, where the
        rules read the same days there: "last week", so the context can word it as said;
        else the ISO text); else the rules on ``text`` and then on each turn (``turns`` are
        turns of the batch).

        The words are looked for among the first :data:`TIME_HINTS` times of the text and
        of each turn, the ones the prompt showed the model beside the turn, and a turn is
        read once per batch however many facts cite it: so the work per fact does not grow
        with the length of its turns (a long turn full of dates made one add take minutes)."""
        if not self._resolve:
            return None
        anchor = next((a for a in anchors if a is not None), None)
        if stated:
            span = parse_iso_span(stated)
            if span is not None:
                # only words said on the entry's own day: the context words the span
                # relative to that day, so a phrase said on another meant other days there
                said_day = anchor.date() if anchor is not None else None
                readings = [find_times(text, anchor, limit=TIME_HINTS) if text else []] + [
                    self._turns[m.id].times
                    for m in turns
                    if m.timestamp is not None and m.timestamp.date() == said_day
                ]
                said = (
                    x.phrase
                    for times in readings
                    for x in times
                    if isinstance(x.span, TimeSpan) and x.span.same_days(span)
                )
                return span.with_phrase(next(said, stated))
            self.unread_times += 1
        found = resolve(text, anchor) if text else None
        for m in turns:
            found = found or self._resolve_turn(m)
        return found

    def _resolve_turn(self, m: Message) -> TimeSpan | None:
        """The rules' time of a turn, read once per batch."""
        if m.id not in self._resolved:
            self._resolved[m.id] = resolve(m.content, m.timestamp)
        return self._resolved[m.id]

    def messages(self, ids: Sequence[str]) -> list[Message]:
        """The turns of ``ids``, in the batch's order."""
        return [self._turns[i].buffered.message for i in sorted(ids, key=self._order.__getitem__)]

    def draft(self, fact: extract_flat.Fact, metadata: dict[str, object]) -> Draft:
        ids = sorted(fact.source_ids, key=self._order.__getitem__)
        sources = self.messages(ids)
        seg = self._turns[ids[0]].segment
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
                event_time=self.time(fact.time, fact.text, [m.timestamp for m in sources], sources),
            ),
            None,
        )

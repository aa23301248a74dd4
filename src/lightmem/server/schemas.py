"""Argument types shared by the REST API and the MCP tools: one name, one description and
one set of allowed values per argument, so both interfaces describe the same thing alike."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SkipValidation

from lightmem.fluxmem.types import FailureKind

__all__ = [
    "AGENT_ID",
    "ALL_SCOPES",
    "AS_OF",
    "BUDGET_TOKENS",
    "ENTRY_ID",
    "FEEDBACK",
    "FILTERS",
    "FULL",
    "KEEP_TOP_N",
    "LIMIT",
    "MESSAGES",
    "MESSAGE_ID",
    "MODE",
    "NODE_ID",
    "QUERY",
    "RECHECK",
    "RETRIEVAL_SCOPE",
    "RUN_ID",
    "SCORE_THRESHOLD",
    "STEP",
    "TEXT",
    "TIME_WINDOW",
    "TIME_WINDOW_PATTERN",
    "TOP_K",
    "USER_ID",
    "VERSION",
    "AgentId",
    "EntryId",
    "InputMessage",
    "Kind",
    "MemoryFilters",
    "Mode",
    "RetrievalScope",
    "RunId",
    "StepFeedback",
    "StepFeedbackArg",
    "UserId",
    "compact_retrieval",
    "scope_dict",
]

Mode = Literal["embedding", "context", "hybrid", "hierarchical"]
Kind = Literal["entry", "event", "summary"]
RetrievalScope = Literal["global", "historical"]

#: A window length: a number followed by s, m, h, d or w ("30m", "12h", "7d", "2w").
TIME_WINDOW_PATTERN = r"^[0-9]+(\.[0-9]+)?[smhdw]$"


class MemoryFilters(BaseModel):
    """Retrieval and listing filters; every field is optional and they combine with AND."""

    model_config = ConfigDict(extra="forbid", strict=True)

    time_from: str | None = Field(
        None, description="Only memories at or after this time (ISO 8601, e.g. '2024-03-01')."
    )
    time_to: str | None = Field(
        None, description="Only memories at or before this time (ISO 8601)."
    )
    speaker: str | None = Field(None, description="Only memories said by this speaker name.")
    topic_id: str | None = Field(None, description="Only memories of this topic segment.")
    event_id: str | None = Field(None, description="Only facts bound to this event (StructMem).")
    kind: Kind | list[Kind] | None = Field(
        None,
        description="Memory kinds: 'entry' (facts), 'event' (StructMem events), 'summary' "
        "(topic and time-window summaries). Default: entries and events.",
    )

    def as_dict(self) -> dict[str, Any] | None:
        """The filters as the library takes them (``None`` when none is set)."""
        out = self.model_dump(exclude_none=True)
        return out or None


# -- descriptions, one per argument name ----------------------------------------------------
USER_ID = "Whose memories: the end user. Give it on every call for a multi-user store."
AGENT_ID = "Which agent's memories (optional second scope level)."
RUN_ID = "Which run or conversation's memories (optional third scope level)."
ENTRY_ID = "The memory's id, as returned by add_memory, retrieve_memory or list_memories."
QUERY = "What to look for, in natural language (e.g. the user's question)."
LIMIT = "Most memories to return."
MODE = (
    "Ranking: 'hybrid' (BM25 + embeddings, the usual choice), 'embedding' (meaning only), "
    "'context' (exact words, BM25) or 'hierarchical' (topic summaries first). "
    "Default: the store's configuration."
)
BUDGET_TOKENS = "Stop adding memories once the context block would exceed this many tokens."
ALL_SCOPES = (
    "Read every user's memories; needed (without user_id) when the store holds several "
    "users, otherwise such a read is refused."
)
AS_OF = (
    "Only memories valid at this time: said by then and not yet superseded by a later one "
    "(ISO 8601 date or date-time, e.g. '2023-06-12' or '2023-06-12T10:00:00Z'; without a "
    "zone it is UTC). Default: now, with superseded memories ranked after their replacement."
)
FULL = "Also return every matched memory as a full record (costs many tokens); default: ids only."
FILTERS = "Restrict the memories considered (time range, speaker, topic, kind)."
TEXT = "The memory's new text; the previous version stays in its history."
VERSION = "Version to bring back (see memory_history); default: the last one before the change."
TIME_WINDOW = "Length of each summarised window: a number and a unit s/m/h/d/w, e.g. '7d'."
RETRIEVAL_SCOPE = (
    "'global': each window summarised on its own; 'historical': each summary also sees the "
    "previous window's summary."
)
TOP_K = "Candidate neighbours considered per memory when building the update queue."
KEEP_TOP_N = "Neighbours kept per memory in the update queue."
SCORE_THRESHOLD = "Cosine similarity in [-1, 1] above which two memories are compared."
RECHECK = (
    "Forget what earlier calls recorded, so this call and the following ones (send it once, "
    "then go on without it) show the updater every memory again: after changing its model "
    "or rules outside lightmem."
)
# FluxMem
STEP = (
    "The number of the step you report: the 'step' of the last answer (start_task's is 0). "
    "Sent again with the same result after a lost answer, it returns the recorded answer "
    "instead of recording the step twice."
)
NODE_ID = "The FluxMem graph node to erase (a fact, episode or skill id)."

MESSAGE_ID = (
    "Your id for the turn; re-sending the same id and text is a no-op. Without one, the id "
    "is derived from the turn's content, role, speaker, time and position in this call: the "
    "same turn at the same position of two calls is stored once (a retry), so give ids or "
    "timestamps to store a literal repeat."
)
MESSAGES = (
    "Turns to store, oldest first: each with content (or text) and optional role, "
    "timestamp, id, speaker_name, speaker_id, metadata. A turn without id gets one derived "
    "from its content, role, speaker, time and position in this call: the same turn at the "
    "same position of two calls is stored once (a retry), so give ids or timestamps to "
    "store a literal repeat."
)
FEEDBACK = "On failure: what was wrong with the context (text, or the structured object)."


class StepFeedback(BaseModel):
    """Structured feedback on a failed step (FluxMem Stage II): the fields of
    :class:`lightmem.fluxmem.types.Feedback`, described. Only its schema is used:
    ``service.record_step`` checks the value, for REST and MCP alike."""

    model_config = ConfigDict(extra="forbid")

    kind: FailureKind = Field(
        description="'missing': a needed fact was absent; 'noise': a given node misled; "
        "'granularity': a node was too coarse or too fine."
    )
    detail: str = Field("", description="What exactly was wrong.")
    node_id: str | None = Field(None, description="The node at fault, if known.")
    steps: list[str] | None = Field(None, description="Finer steps to replace the node with.")


#: Described as text or a :class:`StepFeedback`, passed on as sent: the one check of it is
#: ``service.record_step``'s, so both interfaces refuse the same input with the same message.
StepFeedbackArg = SkipValidation[str | StepFeedback | None]

UserId = Annotated[str | None, Field(description=USER_ID)]
AgentId = Annotated[str | None, Field(description=AGENT_ID)]
RunId = Annotated[str | None, Field(description=RUN_ID)]
EntryId = Annotated[str, Field(description=ENTRY_ID)]


def scope_dict(user_id: str | None, agent_id: str | None, run_id: str | None) -> dict[str, Any]:
    return {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}


def compact_retrieval(found: dict[str, Any], *, full: bool) -> dict[str, Any]:
    """What an agent needs from a retrieval: the context block, the ids in rank order and
    whether the answer's size ended them (``full`` keeps every record too)."""
    out: dict[str, Any] = {
        "context": found["context"],
        "ids": [r["id"] for r in found["results"]],
        "truncated": found["truncated"],
    }
    if full:
        out["results"] = found["results"]
    return out


class InputMessage(BaseModel):
    """One conversation turn to store."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(description="What was said.")
    role: str | None = Field(None, description="Who spoke: 'user' (default) or 'assistant'.")
    timestamp: str | None = Field(
        None, description="When it was said (ISO 8601 or e.g. '1:56 pm on 8 May, 2023')."
    )
    id: str | None = Field(None, description=MESSAGE_ID)
    speaker_name: str | None = Field(None, description="The speaker's display name.")
    speaker_id: str | None = Field(None, description="A stable id of the speaker.")
    metadata: dict[str, Any] | None = Field(None, description="Any extra JSON kept with the turn.")

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)

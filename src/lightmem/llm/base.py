"""The LLM client interface."""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lightmem.errors import BackendError, LightMemError, TransientBackendError
from lightmem.ledger import Ledger, UsageRecord
from lightmem.llm.schema import (
    MESSAGE_OVERHEAD,
    OutputSchema,
    cut_to_tokens,
    messages_tokens_bound,
    prompt_tokens_bound,
)
from lightmem.retry import check_attempts, with_retries

__all__ = [
    "ChatMessage",
    "ChatReply",
    "InvalidReply",
    "LLMClient",
    "T",
    "TransientLLMError",
    "UnusableOutputError",
]

T = TypeVar("T")
ChatMessage = dict[str, str]
log = logging.getLogger("lightmem.llm")


@dataclass(frozen=True, slots=True)
class ChatReply:
    """One answer. ``usage_reported`` is False when the server sent no ``usage`` and the
    token counts are estimates."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    usage_reported: bool = True


#: tokens of a rejected answer shown back to the model in a repair round, when the context
#: is bounded
_ECHO_TOKENS = 200


class TransientLLMError(TransientBackendError):
    """Raised by ``_chat`` for failures worth retrying (429, 5xx, timeouts, lost connections)."""


class InvalidReply(LightMemError, ValueError):
    """Raised by a reply parser: the message is shown to the model to repair its answer.
    (A ValueError too, so parsers may raise either.)"""


class UnusableOutputError(BackendError):
    """The model answered, but no answer was acceptable after every repair round (counted
    in the ledger as ``("llm", "<op>.unusable")``). Callers that can do without the model
    (extraction falls back to per-turn entries) catch this one, not transport failures."""


class LLMClient(ABC):
    """A chat model that answers JSON.

    :meth:`complete_json` is the only public call. It retries transient failures with
    exponential backoff and jitter (``max_attempts``), asks the model to repair a reply
    that is not valid JSON or fails ``parse`` (``json_repairs`` times), and records every
    request in :attr:`ledger` under ``("llm", op)`` with the server's reported usage (or an
    estimate, also counted under ``("llm", "<op>.estimated")``). With ``context_tokens``,
    no request is sent whose prompt plus ``max_tokens`` could exceed it: callers pack their
    prompts with :meth:`fits`, and a request still too long is cut (counted under
    ``("llm", "<op>.cut")``). ``max_tokens`` caps every answer. Providers implement
    :meth:`_chat`.
    """

    name: str

    def __init__(
        self,
        *,
        ledger: Ledger | None = None,
        max_attempts: int = 4,
        json_repairs: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        context_tokens: int | None = None,
        max_tokens: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.ledger = ledger if ledger is not None else Ledger()
        # named as the parameters: a config edge names its own keys before building one
        self.max_attempts = check_attempts(max_attempts, "max_attempts", least=1)
        self.json_repairs = check_attempts(json_repairs, "json_repairs", least=0)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.context_tokens = context_tokens
        self.max_tokens = max_tokens
        self._sleep = sleep

    @abstractmethod
    def _chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        output: OutputSchema | None,
        max_tokens: int | None,
    ) -> ChatReply:
        """One request, constrained to ``output`` when the endpoint supports it and
        limited to ``max_tokens``. Raise :class:`TransientLLMError` for retryable failures
        and :class:`BackendError` for permanent ones."""

    def answer_tokens(self, output: OutputSchema | None) -> int | None:
        """The ``max_tokens`` a call with ``output`` is sent with: the schema's longest
        answer, capped by ``max_tokens`` and by a quarter of ``context_tokens``."""
        limits = [x for x in (output.max_tokens if output else None, self.answer_limit()) if x]
        return min(limits) if limits else None

    def answer_limit(self) -> int | None:
        """The most tokens any answer may take (what a schema is sized down to)."""
        limits = [self.max_tokens] if self.max_tokens else []
        if self.context_tokens:
            limits.append(max(16, self.context_tokens // 4))
        return min(limits) if limits else None

    def fits(self, messages: Sequence[ChatMessage], output: OutputSchema | None) -> bool:
        """Whether this request, its answer and a repair round fit in ``context_tokens``
        (by the high estimates of :mod:`lightmem.llm.schema`; the schema is counted as
        prompt, as some providers do)."""
        limit = self.answer_limit()
        if output and limit and output.max_tokens > limit:
            return False  # the answer the schema allows could be cut
        if not self.context_tokens:
            return True
        answer = self.answer_tokens(output) or 0
        schema = prompt_tokens_bound(json.dumps(output.schema)) if output else 0
        repair = min(answer, _ECHO_TOKENS) + 2 * MESSAGE_OVERHEAD + 128
        need = messages_tokens_bound(messages) + schema + answer + repair
        return need <= self.context_tokens

    def complete_json(
        self,
        messages: Sequence[ChatMessage],
        parse: Callable[[Any], T],
        *,
        op: str,
        final_parse: Callable[[Any], T] | None = None,
        output: OutputSchema | None = None,
    ) -> T:
        """Ask for a JSON answer and return ``parse(answer)``.

        ``parse`` raises :class:`InvalidReply` (or ValueError) when the answer is not
        acceptable; the model then sees the error and answers again. ``final_parse``, if
        given, judges the last allowed answer instead (say, keeping its valid part).
        ``output`` is the bounded schema the answer must follow (sent as a structured
        output where the endpoint supports it). Raises :class:`UnusableOutputError` when no
        answer was acceptable, :class:`BackendError` when the endpoint failed.
        """
        convo = list(messages)
        last_error = ""
        for attempt in range(self.json_repairs + 1):
            reply = self._request(convo, op, output)
            judge = final_parse if final_parse and attempt == self.json_repairs else parse
            try:
                return judge(_loads(reply.text))
            except ValueError as exc:
                last_error = str(exc)
                log.warning("LLM %s reply rejected (%s); asking for a repair", op, last_error)
                echo = reply.text[:20_000]
                if self.context_tokens:
                    echo = cut_to_tokens(echo, _ECHO_TOKENS)
                convo = [
                    *messages,
                    {"role": "assistant", "content": echo},
                    {
                        "role": "user",
                        "content": "Your answer was not accepted: "
                        f"{last_error[:300]}. Reply again with only the corrected JSON object.",
                    },
                ]
        self.ledger.record(UsageRecord("llm", f"{op}.unusable", items=1))
        raise UnusableOutputError(
            f"LLM {self.name} gave no acceptable answer for {op!r} after "
            f"{self.json_repairs + 1} tries: {last_error}"
        )

    def _fit(
        self, messages: Sequence[ChatMessage], max_tokens: int | None, op: str
    ) -> list[ChatMessage]:
        """The request cut so prompt plus answer fit in ``context_tokens``: the longest
        message is shortened until it does (callers pack first, so this is a safety net)."""
        out = [dict(m) for m in messages]
        if not self.context_tokens:
            return out
        room = self.context_tokens - (max_tokens or 0)
        over = messages_tokens_bound(out) - room
        if over <= 0:
            return out
        longest = max(range(len(out)), key=lambda i: len(out[i]["content"]))
        keep = prompt_tokens_bound(out[longest]["content"]) - over - 1
        out[longest]["content"] = cut_to_tokens(out[longest]["content"], max(0, keep))
        self.ledger.record(UsageRecord("llm", f"{op}.cut", items=1))
        log.warning("LLM %s request cut to fit a %d-token context", op, self.context_tokens)
        return out

    def _request(
        self, messages: Sequence[ChatMessage], op: str, output: OutputSchema | None
    ) -> ChatReply:
        max_tokens = self.answer_tokens(output)
        request = self._fit(messages, max_tokens, op)

        def attempt() -> ChatReply:
            with self.ledger.measure("llm", op) as call:  # one record per attempt
                reply = self._chat(request, output=output, max_tokens=max_tokens)
                call.items = 1
                call.prompt_tokens = reply.prompt_tokens
                call.completion_tokens = reply.completion_tokens
                call.estimated = not reply.usage_reported
            return reply

        return with_retries(
            attempt,
            attempts=self.max_attempts,
            what=f"LLM {self.name} for {op!r}",
            backoff_s=self.backoff_s,
            max_backoff_s=self.max_backoff_s,
            sleep=self._sleep,
        )


def _loads(text: str) -> Any:
    """Parse a JSON object from a reply, tolerating a Markdown code fence around it."""
    s = text.strip()
    if s.startswith("```"):
        s = s.split("\n", 1)[1] if "\n" in s else ""
        s = s.rsplit("```", 1)[0]
    try:
        return json.loads(s)
    except ValueError as exc:
        raise InvalidReply(f"not valid JSON ({exc})") from exc
    except RecursionError as exc:
        # json's decoder recurses per bracket: a reply nested about 1,000 deep is as
        # unusable as a syntax error, and must take the same repair and fallback path
        raise InvalidReply("not valid JSON (nested too deeply)") from exc

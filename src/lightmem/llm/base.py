"""The LLM client interface."""

from __future__ import annotations

import json
import logging
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lightmem.errors import BackendError
from lightmem.ledger import Ledger

T = TypeVar("T")
ChatMessage = dict[str, str]
log = logging.getLogger("lightmem.llm")


@dataclass(frozen=True, slots=True)
class ChatReply:
    text: str
    prompt_tokens: int
    completion_tokens: int


class TransientLLMError(Exception):
    """Raised by ``_chat`` for failures worth retrying (429, 5xx, timeouts, lost connections)."""


class InvalidReply(ValueError):
    """Raised by a reply parser: the message is shown to the model to repair its answer."""


class LLMClient(ABC):
    """A chat model that answers JSON.

    :meth:`complete_json` is the only public call. It retries transient failures with
    exponential backoff and jitter (``max_attempts``), asks the model to repair a reply
    that is not valid JSON or fails ``parse`` (``json_repairs`` times), and records every
    request in :attr:`ledger` under ``("llm", op)``. Providers implement :meth:`_chat`.
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
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.ledger = ledger if ledger is not None else Ledger()
        self.max_attempts = max(1, max_attempts)
        self.json_repairs = max(0, json_repairs)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep

    @abstractmethod
    def _chat(self, messages: Sequence[ChatMessage], *, json_mode: bool) -> ChatReply:
        """One request. Raise :class:`TransientLLMError` for retryable failures and
        :class:`BackendError` for permanent ones."""

    def complete_json(
        self,
        messages: Sequence[ChatMessage],
        parse: Callable[[Any], T],
        *,
        op: str,
        final_parse: Callable[[Any], T] | None = None,
    ) -> T:
        """Ask for a JSON answer and return ``parse(answer)``.

        ``parse`` raises :class:`InvalidReply` (or ValueError) when the answer is not
        acceptable; the model then sees the error and answers again. ``final_parse``, if
        given, judges the last allowed answer instead (say, keeping its valid part).
        """
        convo = list(messages)
        last_error = ""
        for attempt in range(self.json_repairs + 1):
            reply = self._request(convo, op)
            judge = final_parse if final_parse and attempt == self.json_repairs else parse
            try:
                return judge(_loads(reply.text))
            except ValueError as exc:
                last_error = str(exc)
                log.warning("LLM %s reply rejected (%s); asking for a repair", op, last_error)
                convo = [
                    *messages,
                    {"role": "assistant", "content": reply.text[:20_000]},
                    {
                        "role": "user",
                        "content": "Your answer was not accepted: "
                        f"{last_error}. Reply again with only the corrected JSON object.",
                    },
                ]
        raise BackendError(
            f"LLM {self.name} gave no acceptable answer for {op!r} after "
            f"{self.json_repairs + 1} tries: {last_error}"
        )

    def _request(self, messages: Sequence[ChatMessage], op: str) -> ChatReply:
        delay = self.backoff_s
        for attempt in range(1, self.max_attempts + 1):
            try:
                with self.ledger.measure("llm", op) as call:
                    reply = self._chat(messages, json_mode=True)
                    call.items = 1
                    call.prompt_tokens = reply.prompt_tokens
                    call.completion_tokens = reply.completion_tokens
                return reply
            except TransientLLMError as exc:
                if attempt == self.max_attempts:
                    raise BackendError(
                        f"LLM {self.name} failed {attempt} times for {op!r}: {exc}"
                    ) from exc
                log.warning("LLM %s attempt %d failed (%s); retrying", op, attempt, exc)
                self._sleep(min(self.max_backoff_s, delay) * (0.5 + random.random() / 2))
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover


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

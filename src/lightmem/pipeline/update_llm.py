"""The LLM updater: one call decides update / delete / ignore for a batch of pairs."""

from __future__ import annotations

from collections.abc import Sequence

from lightmem.llm.base import LLMClient
from lightmem.pipeline.prompts import update as update_prompt
from lightmem.pipeline.update import UpdateAction, UpdateItem


class LLMUpdater:
    """Asks the model about ``pairs_per_call`` (newer, earlier) pairs at a time. The model's
    answers are proposals: ``run_update`` refuses any that names an entry outside the batch."""

    name = "llm"

    def __init__(self, client: LLMClient, *, pairs_per_call: int = 20) -> None:
        self.client = client
        self.pairs_per_call = pairs_per_call

    def decide(self, items: Sequence[UpdateItem]) -> list[UpdateAction]:
        prompt = update_prompt.build([(it.newer, [e for e, _ in it.candidates]) for it in items])
        answers = self.client.complete_json(prompt, update_prompt.parse, op="update")
        actions = []
        for a in answers:
            if a["action"] == "delete":
                actions.append(UpdateAction("delete", a["id"], f"llm ({update_prompt.VERSION})"))
            elif a["action"] == "update":
                actions.append(
                    UpdateAction(
                        "update", a["id"], f"llm ({update_prompt.VERSION})", new_text=a["text"]
                    )
                )
        return actions

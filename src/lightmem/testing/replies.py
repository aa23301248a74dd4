"""Schema-valid scripted answers to lightmem's own prompts, for the stub server."""

from __future__ import annotations

import json
import threading
from typing import Any

from lightmem.text import content_terms

__all__ = ["ScriptedLLM"]


class ScriptedLLM:
    """A ``chat_handler`` for :class:`OpenAIStubServer`.

    Replies queued with :meth:`queue` are served first, verbatim (malformed JSON, unknown ids,
    anything a fault test needs). Otherwise it answers lightmem's prompts deterministically:
    flat extraction returns one fact per turn citing that turn (its time the first one the
    prompt resolved for the turn, or ""); event extraction makes one
    event per day binding those facts, each following the one before; update deletes an
    earlier memory whose words all appear in the newer one and ignores the rest; FluxMem's
    prompts get the offline reasoner's answers; a text game's next action is the first
    valid one not yet taken that the memory names.
    """

    def __init__(self) -> None:
        self._queue: list[str] = []
        self._lock = threading.Lock()

    def queue(self, *replies: str) -> None:
        with self._lock:
            self._queue.extend(replies)

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        with self._lock:
            if self._queue:
                return self._queue.pop(0)
        if len(messages) < 2 or "<data>" not in str(messages[1].get("content", "")):
            raise ValueError("not one of lightmem's prompts")
        body = _unfence(str(messages[1]["content"]))
        system = str(messages[0]["content"])
        if '{"scores"' in system or '{"steps"' in system or '"kind": "missing' in system:
            return _fluxmem(system, json.loads(body))
        if '{"action": <the number' in system:
            return json.dumps({"action": _game_action(json.loads(body))})
        if '{"label": "CORRECT"}' in system:
            gold = body.split("GOLD: ", 1)[1].split("\n", 1)[0]
            said = body.split("GENERATED: ", 1)[1].split("\n", 1)[0]
            hit = set(content_terms(gold)) & set(content_terms(said))
            return json.dumps({"label": "CORRECT" if hit else "WRONG"})
        if '{"answer": "..."}' in system:
            shown = body.split("\nMEMORIES:\n", 1)[-1].splitlines()
            memories = [ln.strip(" -") for ln in shown if ln and not ln.startswith(("[", "  - "))]
            return json.dumps({"answer": memories[0] if memories else "unknown"})
        if '"summary": "..."}' in str(messages[0]["content"]):
            lines = [ln for ln in body.splitlines() if not ln.startswith("PREVIOUS: ")]
            return json.dumps({"summary": f"{len(lines)} memories: " + " | ".join(lines)[:500]})
        if body.lstrip().startswith("["):
            data = json.loads(body)
            return json.dumps({"actions": [a for item in data for a in _update(item)]})
        days: list[list[dict[str, Any]]] = []
        for line in body.splitlines():
            if line.startswith("# ") or not days:
                days.append([])
            if line.startswith("# ") or " " not in line:
                continue
            turn_id, said = line.split(" ", 1)
            said, _, times = said.partition(" [times: ")
            when = times.split(";")[0].rpartition(" = ")[2].rstrip("]") if times else ""
            days[-1].append({"fact": said, "source_ids": [turn_id], "time": when})
        facts = [f for day in days for f in day]
        if '"events"' not in str(messages[0]["content"]):
            return json.dumps({"facts": facts})
        events = [
            {
                "id": f"e{i}",
                "summary": " / ".join(f["fact"] for f in day)[:200],
                "time": "",
                "participants": sorted({f["fact"].split(":", 1)[0] for f in day}),
                "cause": "",
                "effect": "",
                "facts": day,
            }
            for i, day in enumerate(d for d in days if d)
        ]
        relations = [
            {"from": f"e{i}", "to": f"e{i + 1}", "type": "follows"} for i in range(len(events) - 1)
        ]
        return json.dumps({"events": events, "relations": relations})


def _game_action(data: dict[str, Any]) -> int:
    """A text game's next action: the first valid one not yet taken whose every word the
    memory names, else the first not yet taken, else the first."""
    taken = {s["action"] for s in data["steps"]}
    memory = set(content_terms(data["memory"]))
    valid = [v.split(": ", 1) for v in data["valid"]]
    fresh = [(int(i), a) for i, a in valid if a not in taken]
    known = [i for i, a in fresh if set(content_terms(a)) <= memory]
    return (known or [i for i, _ in fresh] or [0])[0]


def _update(item: dict[str, Any]) -> list[dict[str, str]]:
    newer = set(content_terms(item["newer"]["text"]))
    out = []
    for e in item["earlier"]:
        terms = set(content_terms(e["text"]))
        action = "delete" if terms and terms <= newer else "ignore"
        out.append({"id": e["id"], "action": action})
    return out


def _unfence(text: str) -> str:
    return text.split("<data>", 1)[1].rsplit("</data>", 1)[0].strip()


def _fluxmem(system: str, data: dict[str, Any]) -> str:
    """FluxMem prompts, answered by the offline reasoner's rules."""
    from lightmem.fluxmem.reasoner import OfflineReasoner

    rules = OfflineReasoner()
    if '{"scores"' in system:
        return json.dumps({"scores": rules.verify(data["task"], data["facts"])})
    if '"kind": "missing' in system:
        fb = rules.attribute(data["task"], data["feedback"])
        return json.dumps({"kind": fb.kind, "detail": fb.detail})
    if "trajectories" in data:
        return json.dumps({"steps": rules.induce(data["trajectories"]) or ["observe"]})
    if "failing" in data:
        return json.dumps(
            {
                "steps": rules.refine(data["skill"], data["successful"], data["failing"])
                or ["observe"]
            }
        )
    return json.dumps({"steps": rules.reshape(data["skill"], data["problem"], data["reference"])})

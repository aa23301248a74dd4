"""Knowledge updates on short conversations written from outside: does the current value
come first, and is a fact that only looks changed kept?

    python benchmarks/update_cases.py benchmarks/data/update_cases_review.json [--mode offline]

Each case is timestamped sessions of turns tagged ``new`` (the current value), ``stale``
(the value it replaced), ``wrong`` (a look-alike that is not the answer) or ``keep`` (a fact
that must stay), and a question; a case with ``list`` is a list of facts with one question
each and an optional change. Small talk and assistant acknowledgements are put around the
turns. Every case gets its own ``user_id`` in one SQLite file, sessions are added one
``add_memory(force_extract=True)`` each; ``--mode offline`` then runs the offline update
pass, ``online`` sets ``update: "online"``, ``none`` runs no update; ``buffered`` extracts
and updates all sessions but the last, which is added without ``force_extract`` (its turns
are still in the buffers, found through their provisional entries). A retrieved memory
counts for its own turn only (its first source id). Prints JSON: ``top1`` / ``top3`` (the
current value retrieved first / in the top 3), ``stale_above`` (a stale or look-alike value
ranked above it), per kind of question (``change``, ``keep``, ``list``) and per pattern,
and per case kind ``superseded`` (every stale turn superseded), ``false_removal`` (a kept
fact superseded or deleted) and ``wrong_superseded`` (a turn superseded that is not stale).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from lightmem import LightMemory

FILLER = {
    "en": [
        "Morning! Quick one before work.",
        "Long day, but a good one.",
        "Can you remind me to water the plants later?",
        "I need a recipe idea for tonight.",
        "Ugh, Mondays.",
    ],
    "zh": [
        "早上好！",
        "今天好累啊。",
        "帮我想想晚饭吃什么吧。",
        "提醒我明天交电费。",
        "周一真难熬。",
    ],
}
ACK = {
    "en": ["Got it, thanks for letting me know.", "Noted.", "Thanks, I'll remember that.",
           "Understood.", "Okay, good to know."],
    "zh": ["好的，记住了。", "明白了。", "谢谢告诉我。", "收到。", "好的。"],
}  # fmt: skip
REPLY = {"en": "Happy to help.", "zh": "没问题。"}
Question = tuple[str, list[str], list[str]]  # question, the right turns, the wrong ones


def build(
    case: dict[str, Any],
) -> tuple[list[list[dict[str, Any]]], dict[str, set[str]], list[Question]]:
    """The case's sessions of messages, its turn ids by tag, and its questions."""
    lang = case["lang"]
    tags: dict[str, set[str]] = defaultdict(set)
    if case.get("list"):
        raw = [
            {
                "date": "2023-02-01T18:00",
                "turns": [[case["user"], f, "fact"] for f, _ in case["facts"]],
            }
        ]
        if case["change"]:
            raw.append(
                {"date": "2023-07-01T18:00", "turns": [[case["user"], case["change"][0], "change"]]}
            )
    else:
        raw = case["sessions"]
    sessions: list[list[dict[str, Any]]] = []
    facts: list[str] = []
    for s, session in enumerate(raw):
        start = datetime.fromisoformat(session["date"])
        msgs: list[dict[str, Any]] = []
        turns = [
            (case["user"], FILLER[lang][(s + len(case["id"])) % len(FILLER[lang])], ""),
            ("Assistant", REPLY[lang], ""),
        ]
        for j, (speaker, text, tag) in enumerate(session["turns"]):
            turns.append((speaker, text, tag))
            nxt = session["turns"][j + 1][0] if j + 1 < len(session["turns"]) else None
            if speaker != "Assistant" and nxt != "Assistant":
                turns.append(("Assistant", ACK[lang][(len(turns) + 1) % len(ACK[lang])], ""))
        for speaker, text, tag in turns:
            tid = f"{case['id']}-s{s + 1}t{len(msgs) + 1}"
            msgs.append({
                "id": tid, "role": "assistant" if speaker == "Assistant" else "user",
                "speaker_name": speaker, "content": text,
                "timestamp": (start + timedelta(minutes=2 * len(msgs))).isoformat(),
            })  # fmt: skip
            for t in filter(None, tag.split("+")):
                tags[t].add(tid)
            if tag == "fact":
                facts.append(tid)
        sessions.append(msgs)
    if case.get("order") == "reverse":  # a backlog imported newest first
        sessions.reverse()
    questions: list[Question] = []
    if case.get("list"):
        questions += [(q, [t], []) for t, (_, q) in zip(facts, case["facts"], strict=True) if q]
        if case["change"]:
            old = facts[case["change"][2]]
            (new,) = tags["change"]
            questions.append((case["change"][1], [new], [old]))
            tags["stale"].add(old)
        tags["keep"] |= {t for t in facts if t not in tags["stale"]}
    else:
        questions.append(
            (case["question"], sorted(tags["new"]), sorted(tags["stale"] | tags["wrong"]))
        )
    return sessions, tags, questions


def _turn(entry: Any) -> str:
    return entry.source_ids[0] if entry.source_ids else ""


def run(cases: list[dict[str, Any]], mode: str, db: Path) -> Iterator[dict[str, Any]]:
    """Per case: its questions' ranks and what the update did to its turns."""
    cfg: dict[str, Any] = {"store": {"path": str(db)}}
    if mode == "online":
        cfg["update"] = "online"
    with LightMemory.from_config(cfg) as mem:
        for case in cases:
            uid = f"u-{case['id']}"
            sessions, tags, questions = build(case)
            # "buffered": the last session is not extracted yet (found through its
            # provisional entries), what came before was extracted and updated offline
            last = sessions[-1] if mode == "buffered" and len(sessions) > 1 else None
            for msgs in sessions if last is None else sessions[:-1]:
                mem.add_memory(msgs, force_extract=True, user_id=uid)
            if mode in ("offline", "buffered"):
                mem.construct_update_queue_all_entries(user_id=uid)
                mem.offline_update_all_entries(user_id=uid)
            if last is not None:
                mem.add_memory(last, user_id=uid)
            entries = mem.list_entries({"kind": "entry"}, user_id=uid, limit=1000)
            superseded = {_turn(e) for e in entries if e.superseded_by}
            own = {_turn(e) for e in entries}
            gone = {m["id"] for msgs in sessions for m in msgs} - own  # deleted as a duplicate
            ranks = []
            for q, right, wrong in questions:
                got = [_turn(r.entry) for r in mem.retrieve(q, limit=10, user_id=uid)]
                first_right = next((i for i, t in enumerate(got) if t in right), 99)
                first_wrong = next((i for i, t in enumerate(got) if t in wrong), 99)
                ranks.append((bool(wrong), first_right, first_wrong < first_right))
            yield {
                "case": case, "ranks": ranks,
                "superseded": bool(tags["stale"]) and tags["stale"] <= superseded,
                "false_removal": bool(tags["keep"] & (superseded | gone)),
                "wrong_superseded": bool(superseded - tags["stale"]),
            }  # fmt: skip


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cases: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for res in results:
        case = res["case"]
        listed = bool(case.get("list"))
        for changed, right, stale_above in res["ranks"]:
            kind = "change" if (changed if listed else case.get("expect_supersede")) else "keep"
            kind = "list" if listed and kind == "keep" else kind
            for key in (kind, f"{kind}:{case['lang'] if listed else case['pattern']}"):
                r = rows[key]
                r["n"] += 1
                r["top1"] += right == 0
                r["top3"] += right < 3
                r["stale_above"] += stale_above
        if not listed:
            c = cases["change" if case.get("expect_supersede") else "no_change"]
            c["n"] += 1
            for key in ("superseded", "false_removal", "wrong_superseded"):
                c[key] += res[key]

    def rates(r: dict[str, int]) -> dict[str, Any]:
        return {"n": r["n"], **{k: round(v / r["n"], 3) for k, v in r.items() if k != "n"}}

    return {
        "questions": {k: rates(rows[k]) for k in sorted(rows)},
        "cases": {k: rates(cases[k]) for k in sorted(cases)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", type=Path)
    ap.add_argument("--mode", choices=["none", "offline", "online", "buffered"], default="offline")
    a = ap.parse_args()
    cases = json.loads(a.cases.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        results = list(run(cases, a.mode, Path(tmp) / "cases.db"))
    out = {"cases_file": a.cases.name, "mode": a.mode, **summary(results)}
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    print()


if __name__ == "__main__":
    main()

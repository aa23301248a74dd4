"""How well the offline time rules read LoCoMo's temporal questions, with no retrieval.

For every category-2 question whose answer names a time ("7 May 2023", "The week before
9 June 2023", "2022") and whose evidence is one turn: does the rule resolver find a time in
that turn (against its session date), and is it the answer's days? Without the resolver
the only time beside a turn is its session date, so that is the baseline: how often the
session day itself is the answer.

Run: python benchmarks/locomo_time_resolution.py /path/to/locomo_dev.json  (prints JSON)
"""

from __future__ import annotations

import json
import sys
from typing import Any

from lightmem.bench.locomo import evidence_ids, load
from lightmem.bench.locomo_time import answer_span
from lightmem.timeparse import parse_timestamp
from lightmem.timeresolve import resolve
from lightmem.timespan import TimeSpan, YearlessSpan, day_span


def _same(target: TimeSpan | YearlessSpan, span: TimeSpan) -> bool:
    if isinstance(target, YearlessSpan):
        return target.in_year(span.start.year).same_days(span)
    return target.same_days(span)


def main(path: str) -> dict[str, Any]:
    counts = {"questions": 0, "turn_names_a_time": 0, "resolved_equals_answer": 0}
    session_day_equals_answer = 0
    for sample in load(path):
        conv = sample["conversation"]
        turns = {
            t["dia_id"]: (t["text"], conv[f"{key}_date_time"])
            for key, value in conv.items()
            if key.startswith("session_") and isinstance(value, list)
            for t in value
        }
        for qa in sample.get("qa", []):
            found = answer_span(qa.get("answer"))
            ev = sorted(evidence_ids(qa.get("evidence", [])))
            if qa.get("category") != 2 or found is None or len(ev) != 1 or ev[0] not in turns:
                continue
            text, when = turns[ev[0]]
            said = parse_timestamp(when)
            counts["questions"] += 1
            span = resolve(text, said)
            if span is not None:
                counts["turn_names_a_time"] += 1
                counts["resolved_equals_answer"] += _same(found[1], span)
            session_day_equals_answer += _same(found[1], day_span(said.date()))
    n = max(1, counts["questions"])
    return {
        **counts,
        "resolved_share": round(counts["resolved_equals_answer"] / n, 4),
        "baseline_session_day_share": round(session_day_equals_answer / n, 4),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), indent=2))

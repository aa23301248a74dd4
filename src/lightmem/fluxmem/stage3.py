"""Stage III: cluster episodes, induce a skill per cluster, refine it until PEMS settles."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from lightmem.embed.base import Embedder
from lightmem.fluxmem.config import FluxMemConfig
from lightmem.fluxmem.kmeans import default_clusters, kmeans
from lightmem.fluxmem.pems import pems
from lightmem.fluxmem.reasoner import Reasoner, step_key
from lightmem.fluxmem.slots import Run, bind, episode_run, induce
from lightmem.fluxmem.stage2 import skill_text
from lightmem.fluxmem.types import Edge, Node, StepResult
from lightmem.store.graph import GraphStore
from lightmem.types import Scope

__all__ = [
    "EXPAND_QUORUM",
    "GRADUATE_ETA",
    "ConsolidationReport",
    "ReplayFn",
    "SkillDraft",
    "Stage3",
]


class SkillDraft(str):
    """The skill text a replay is asked to follow (a ``str``), carrying its ``steps`` and,
    for a slotted skill, its ``slots`` (the rules :func:`lightmem.fluxmem.slots.bind` uses).
    """

    steps: list[str]
    slots: dict[str, Any]

    def __new__(cls, steps: list[str], slots: dict[str, Any]) -> SkillDraft:
        draft = super().__new__(cls, skill_text(steps))
        draft.steps, draft.slots = list(steps), dict(slots)
        return draft


#: ``replay_fn(skill, task)``: replay ``skill`` on ``task``; True/False, or the replay's
#: StepResult (its actions and observations then show which steps failed).
ReplayFn = Callable[[SkillDraft, str], "bool | StepResult"]
#: Least replay success rate for a converged skill to graduate (become mature).
GRADUATE_ETA = 0.8


@dataclass
class ConsolidationReport:
    """``curves``: PEMS per refinement round, one list per skill touched."""

    clusters: int = 0
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    curves: dict[str, list[float]] = field(default_factory=dict)
    graduated: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "clusters": self.clusters,
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "pems_curves": self.curves,
            "graduated": self.graduated,
        }


@dataclass(frozen=True, slots=True)
class Stage3:
    graph: GraphStore
    embedder: Embedder
    reasoner: Reasoner
    cfg: FluxMemConfig

    PROCEDURE_WEIGHT = 2.0
    #: Least share of step verbs an episode must have in common with a skill to hand it on.
    MIN_ALIGNMENT = 0.5

    def consolidate(self, scope: Scope, replay_fn: ReplayFn | None = None) -> ConsolidationReport:
        """Incremental: a cluster whose episodes already distil into a skill updates that
        skill (a new version only if its steps change); it never creates a duplicate."""
        report = ConsolidationReport()
        nodes = self.graph.nodes("episodic", scope)
        if not nodes:
            return report
        # Episodes are clustered on what they did as much as on what they were asked: a
        # skill distils a procedure, so its episodes should share one. The procedure is the
        # sequence of step verbs, so task nouns inside steps do not split it.
        asked = self.embedder.embed(
            [str(n.data.get("task", n.text)) for n in nodes], op="fluxmem.stage3"
        )
        did = self.embedder.embed([_procedure(n) for n in nodes], op="fluxmem.stage3")
        matrix = np.hstack([asked, self.PROCEDURE_WEIGHT * did]).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        ids = [n.id for n in nodes]
        episodes = {n.id: n for n in nodes}
        k = self.cfg.num_clusters or default_clusters(len(ids))
        labels = kmeans(matrix, k, seed=self.cfg.seed)
        report.clusters = int(labels.max()) + 1
        n_proc = len(self.graph.nodes("procedural", scope))
        for j in range(report.clusters):
            members = [episodes[ids[i]] for i in np.flatnonzero(labels == j) if ids[i] in episodes]
            wins = [e for e in members if e.data.get("success")]
            if not wins:
                continue
            existing = self._existing_skill(members)
            n_total = n_proc + (0 if existing else 1)
            found = self._refine(members, wins, existing, n_total, replay_fn)
            if not found.steps:
                continue
            skill_id = self._write(scope, found, members, existing, report)
            curve = found.curve
            if existing is None:
                n_proc += 1
            report.curves[skill_id] = curve
        return report

    def _existing_skill(self, members: Sequence[Node]) -> Node | None:
        votes = Counter(e.dst for e in self.graph.edges("distill", src=[m.id for m in members]))
        if not votes:
            return None
        return self.graph.get_node(votes.most_common(1)[0][0])

    def _refine(
        self,
        members: Sequence[Node],
        wins: Sequence[Node],
        existing: Node | None,
        n_procedural: int,
        replay_fn: ReplayFn | None,
    ) -> _Found:
        """Induce, then refine until PEMS settles. With ``replay_fn`` eta is the replay
        success rate, and a slotted skill loses the steps its failing replays ended on and
        the steps no replay could use; a converged skill that replays well graduates."""
        good = [list(e.data.get("trajectory", [])) for e in wins]
        bad = [list(e.data.get("trajectory", [])) for e in members if not e.data.get("success")]
        runs = [r for e in wins if (r := episode_run(e)) is not None]
        slots: dict[str, Any] = {}
        # Induced from what the runs showed: replays say which of its steps failed, slotted
        # or not (a skill of constant steps, "move south, take coin", is refined by replay
        # like any other; the reasoner's refine only sees trajectories).
        from_runs = bool(runs) and len(runs) == len(wins)
        if from_runs:
            steps, slots = induce(runs)
        else:
            steps = self.reasoner.induce(good)
        prev_vec = None
        if existing is not None:
            prev_vec = self.embedder.embed([existing.text], op="fluxmem.stage3")[0]
        found = _Found([], {}, [], np.zeros(self.embedder.dim, np.float32), 0.0)
        if prev_vec is not None:
            found.vec = prev_vec
        replays: list[tuple[bool, StepResult | None]] = []
        tasks = [str(m.data.get("task", "")) for m in members]
        kept: set[str] = set()  # constant steps a replay without them showed are needed
        revisions: set[tuple[str, ...]] = set()  # revised or pruned drafts already replayed
        worse: set[tuple[str, ...]] = set()  # pruned drafts whose replays did worse
        for rnd in range(max(1, self.cfg.max_consolidation_rounds)):
            # A step put back, revised or found unneeded this round: not settled yet.
            expanded = revised = dropped = cut = False
            if rnd and from_runs and replays:
                pruned = _prune_by_replay(steps, slots, replays, tasks)
                if tuple(pruned[0]) in worse:
                    pruned = (steps, slots)
                cut = pruned != (steps, slots)
                if pruned == (steps, slots) and replay_fn is not None:
                    pruned = _expand_by_replay(steps, slots, runs, replays, tasks, replay_fn)
                    expanded = pruned[0] != steps
                if pruned == (steps, slots) and replay_fn is not None:
                    pruned = _revise_by_replay(steps, slots, replays, tasks, replay_fn, revisions)
                    revised = pruned != (steps, slots)
                if pruned == (steps, slots) and replay_fn is not None:
                    pruned = _drop_unneeded(steps, slots, replays, tasks, replay_fn, kept)
                    dropped = pruned[0] != steps
                steps, slots = pruned
            elif rnd:
                steps = self.reasoner.refine(steps, good, bad)
            if not steps:
                break
            draft = SkillDraft(steps, slots)
            vec = self.embedder.embed([str(draft)], op="fluxmem.stage3")[0]
            if replay_fn is not None:
                replayed = [_replayed(replay_fn(draft, t)) for t in tasks]
                eta = float(np.mean([ok for ok, _ in replayed]))
                if cut and eta < found.eta:
                    # The steps failing replays ended on were needed by others: keep the
                    # version before the prune (its replays stand) and never prune to this
                    # draft again, or the skill swings between the two every other round.
                    worse.add(tuple(steps))
                    revisions.add(tuple(steps))
                    steps, slots = found.steps, found.slots
                    continue
                replays = replayed
            else:
                eta = len(wins) / len(members)
            found.curve.append(pems(eta, n_procedural, str(draft), prev_vec, vec))
            found.steps, found.slots, found.vec, found.eta = steps, slots, vec, eta
            prev_vec = vec
            c = found.curve
            changed = expanded or revised or dropped
            if not changed and len(c) >= 2 and abs(c[-1] - c[-2]) < self.cfg.pems_threshold:
                found.graduated = replay_fn is not None and eta >= GRADUATE_ETA
                break
        else:
            # Out of rounds while still only dropping steps that cost a turn: what it does
            # has settled (replays as successful), only its length was still shrinking. A
            # step put back in the last round has changed what it does: not settled.
            found.graduated = replay_fn is not None and dropped and found.eta >= GRADUATE_ETA
        return found

    def _write(
        self,
        scope: Scope,
        found: _Found,
        members: Sequence[Node],
        existing: Node | None,
        report: ConsolidationReport,
    ) -> str:
        steps, vec = found.steps, found.vec
        sources = sorted(m.id for m in members)
        score = found.curve[-1] if found.curve else 0.0
        fields: dict[str, Any] = {"source_episodes": sources, "pems": score, "eta": found.eta}
        fields["slots"] = found.slots
        fields["graduated"] = found.graduated
        if found.graduated:
            tasks = [str(m.data.get("task", m.text)) for m in members]
            trigger = self.embedder.embed(tasks, op="fluxmem.stage3").mean(axis=0)
            trigger /= float(np.linalg.norm(trigger)) or 1.0
            fields["trigger"] = [round(float(x), 5) for x in trigger]
        if existing is None:
            node = Node(
                id=uuid.uuid4().hex,
                kind="procedural",
                text=skill_text(steps),
                scope=scope,
                data={"steps": steps, "versions": [], **fields},
            )
            self.graph.add_node(node, vec, reason="stage3: induced skill")
            report.created.append(node.id)
            skill_id = node.id
        elif existing.steps != steps or existing.data.get("slots", {}) != found.slots:
            versions = [
                *existing.data.get("versions", []),
                {"version": existing.version, "steps": existing.data.get("steps", [])},
            ]
            new = replace(
                existing,
                text=skill_text(steps),
                data={**dict(existing.data), "steps": steps, "versions": versions, **fields},
            )
            self.graph.update_node(new, vec, reason="stage3: refined skill")
            report.updated.append(existing.id)
            skill_id = existing.id
        else:
            report.unchanged.append(existing.id)
            skill_id = existing.id
            if any(existing.data.get(k) != v for k, v in fields.items()):
                # Same steps, new evidence (say, a replay): the stored track record that
                # Stage I ranks skills by must follow it.
                rescored = {**dict(existing.data), **fields}
                self.graph.update_node(
                    replace(existing, data=rescored), vec, reason="stage3: re-scored skill"
                )
        if found.graduated:
            report.graduated.append(skill_id)
        # An episode distils into the skill as far as it succeeded by the skill's procedure:
        # a cluster can hold episodes of another procedure, and those must not hand the
        # skill on to tasks like theirs.
        keys = {step_key(x) for x in steps}
        have = {e.src: e for e in self.graph.edges("distill", dst=[skill_id])}
        for m in members:
            did = {step_key(str(x)) for x in m.data.get("trajectory", [])}
            weight = 0.0
            if m.data.get("success") and did:
                weight = round(len(keys & did) / len(keys | did), 3)
                weight = weight if weight >= self.MIN_ALIGNMENT else 0.0
            if weight > 0 and (m.id not in have or have[m.id].weight != weight):
                self.graph.add_edge(Edge("distill", m.id, skill_id, weight), "stage3: distill")
            elif weight == 0 and m.id in have:
                self.graph.remove_edge("distill", m.id, skill_id, "stage3: no longer follows")
        return skill_id


def _procedure(node: Node) -> str:
    keys = [step_key(str(s)) for s in node.data.get("trajectory", [])]
    return " then ".join(keys) if keys else "no steps"


@dataclass
class _Found:
    steps: list[str]
    slots: dict[str, Any]
    curve: list[float]
    vec: np.ndarray
    eta: float
    graduated: bool = False


def _replayed(out: bool | StepResult) -> tuple[bool, StepResult | None]:
    if isinstance(out, StepResult):
        return bool(out.success), out
    return bool(out), None


def _replay_cost(
    draft: SkillDraft, tasks: Sequence[str], replay_fn: ReplayFn
) -> tuple[float, float]:
    """:func:`_cost` of ``draft`` replayed on each of ``tasks``."""
    return _cost([_replayed(replay_fn(draft, t)) for t in tasks])


def _slots_of(steps: Sequence[str], slots: Mapping[str, Any]) -> dict[str, Any]:
    """The slot rules of those ``steps`` that have some."""
    return {s: slots[s] for s in steps if s in slots}


def _cost(replays: Sequence[tuple[bool, StepResult | None]]) -> tuple[float, float]:
    """(replay success rate, minus the mean steps of the successful replays): higher is
    better."""
    wins = [len(r.actions) for ok, r in replays if ok and r is not None]
    rate = sum(ok for ok, _ in replays) / len(replays) if replays else 0.0
    return rate, -(sum(wins) / len(wins)) if wins else 0.0


#: Least share of the winning runs a step must come from to be tried back into a skill
#: whose replays fail (the skill itself keeps steps half of them share).
EXPAND_QUORUM = 0.2


def _expand_by_replay(
    steps: list[str],
    slots: dict[str, Any],
    runs: Sequence[Run],
    replays: Sequence[tuple[bool, StepResult | None]],
    tasks: Sequence[str],
    replay_fn: ReplayFn,
) -> tuple[list[str], dict[str, Any]]:
    """Where replays fail, the skill with the one step that fewer of its winning runs
    shared (where the knife was: the cupboard in some kitchens, the drawer in others)
    which, put back in its place, makes the most replays succeed; unchanged if none
    does."""
    if not runs or all(ok for ok, _ in replays):
        return steps, slots
    wide, wide_slots = induce(runs, EXPAND_QUORUM)
    best, best_cost = (steps, slots), _cost(replays)
    for k, step in enumerate(wide):
        if step in steps:
            continue
        # After the latest step of the skill that comes before it in the wider skill.
        before = [s for s in wide[:k] if s in steps]
        at = steps.index(before[-1]) + 1 if before else 0
        trial = [*steps[:at], step, *steps[at:]]
        trial_slots = {**slots, **({step: wide_slots[step]} if step in wide_slots else {})}
        draft = SkillDraft(trial, trial_slots)
        cost = _replay_cost(draft, tasks, replay_fn)
        if cost[0] > best_cost[0]:
            best, best_cost = (trial, trial_slots), cost
    return best


def _drop_unneeded(
    steps: list[str],
    slots: dict[str, Any],
    replays: Sequence[tuple[bool, StepResult | None]],
    tasks: Sequence[str],
    replay_fn: ReplayFn,
    kept: set[str],
) -> tuple[list[str], dict[str, Any]]:
    """The skill without the first constant step whose removal keeps the replays as
    successful in fewer steps (a step that only costs a turn); each step is tried once
    (``kept`` remembers those found needed, or taken anyway)."""
    now = _cost(replays)
    for step in steps:
        if step in slots or step in kept:
            continue
        trial = [s for s in steps if s != step]
        if not trial:
            break
        draft = SkillDraft(trial, slots)
        rate, steps_saved = _replay_cost(draft, tasks, replay_fn)
        if rate >= now[0] and steps_saved > now[1]:
            return trial, slots
        kept.add(step)
    return steps, slots


def _prune_by_replay(
    steps: list[str],
    slots: dict[str, Any],
    replays: Sequence[tuple[bool, StepResult | None]],
    tasks: Sequence[str] = (),
) -> tuple[list[str], dict[str, Any]]:
    """Drop the steps failing replays ended on (unless a successful one also did); when
    some replays succeeded, also the steps none of them needed. A step is matched to a
    replayed action as the player bound it: with the task text first among what it had
    read (``tasks``, in the order of ``replays``) and all it had seen before."""
    used_ok: set[str] = set()
    blamed: set[str] = set()
    ended_ok: set[str] = set()
    for ok, hits in _steps_used(steps, slots, replays, tasks):
        if ok:
            used_ok.update(s for hit in hits for s in hit)
        if hits:
            (ended_ok if ok else blamed).update(hits[-1][:1])
    keep = [
        s
        for s in steps
        if not (s in blamed and s not in ended_ok) and (not used_ok or s in used_ok)
    ]
    return keep, _slots_of(keep, slots)


def _steps_used(
    steps: Sequence[str],
    slots: dict[str, Any],
    replays: Sequence[tuple[bool, StepResult | None]],
    tasks: Sequence[str],
) -> list[tuple[bool, list[list[str]]]]:
    """Per replay that shows what it did, its success and, for each action it took, the
    steps that bind to it, as the player bound them: with the task text first among what
    it had read (``tasks``, in the order of ``replays``) and all it had seen before."""
    out = []
    for i, (ok, res) in enumerate(replays):
        task = tasks[i] if i < len(tasks) else ""
        if res is None or len(res.observations) != len(res.actions) or not res.actions:
            continue
        acts, obs = list(res.actions), list(res.observations)
        docs = list(res.reads) if len(res.reads) == len(acts) else obs
        hits = []
        for k, act in enumerate(acts):
            reads = [task, *(d for d in docs[:k] if d)]
            now = "\n".join([task, *obs[:k]])
            hits.append([s for s in steps if bind(s, slots.get(s, {}), [act], reads, now)])
        out.append((ok, hits))
    return out


def _revise_by_replay(
    steps: list[str],
    slots: dict[str, Any],
    replays: Sequence[tuple[bool, StepResult | None]],
    tasks: Sequence[str],
    replay_fn: ReplayFn,
    tried: set[tuple[str, ...]],
) -> tuple[list[str], dict[str, Any]]:
    """Where replays fail, the skill with one step the failing replays took revised: a
    constant step made a slot of what is in view ("open cutlery drawer" -> "open
    <seen1>": the knife's drawer is a cupboard in other kitchens), or the step dropped (a
    remembered "move south" that led back where the search had come from). The best
    revision is kept if some replay wins and replays say it is no worse: more of them
    succeed, or as many in fewer turns, or as many in as many turns with fewer steps.
    Unchanged if none is;
    ``tried`` keeps the drafts already replayed, so each is replayed once."""
    if all(ok for ok, _ in replays):
        return steps, slots
    used = [
        s
        for ok, hits in _steps_used(steps, slots, replays, tasks)
        if not ok
        for h in hits
        for s in h
    ]
    best, best_key = (steps, slots), (*_cost(replays), -len(steps))
    for step in dict.fromkeys(used):
        for trial in _revisions(step, steps, slots):
            if tuple(trial[0]) in tried or not trial[0]:
                continue
            tried.add(tuple(trial[0]))
            cost = _replay_cost(SkillDraft(*trial), tasks, replay_fn)
            # A draft no replay wins says nothing of which steps work: never kept.
            if cost[0] > 0 and (*cost, -len(trial[0])) > best_key:
                best, best_key = trial, (*cost, -len(trial[0]))
    return best


def _revisions(
    step: str, steps: list[str], slots: dict[str, Any]
) -> list[tuple[list[str], dict[str, Any]]]:
    """``steps`` without ``step`` and, for a constant step of more than one word, with it
    made "<verb> <seen1>" (whatever in view the verb applies to)."""
    dropped = [s for s in steps if s != step]
    out = [(dropped, _slots_of(dropped, slots))]
    verb, _, rest = step.partition(" ")
    if rest and "<" not in step:
        wide = f"{verb} <seen1>"
        revised = list(dict.fromkeys(wide if s == step else s for s in steps))
        rules = {**slots, wide: slots.get(wide, {"seen1": {"fill": "seen"}})}
        out.append((revised, _slots_of(revised, rules)))
    return out

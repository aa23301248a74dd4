"""FluxMem task sessions kept in the store (issue 11, item 8): a task started on one service
instance is continued on another and after a restart, on both backends; one step at a time
per session; a cap over every instance; idle sessions expire with their episode recorded."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from conftest import drop_schema, require_postgres
from lightmem import InvalidInputError, NotFoundError, WordLlamaEmbedder
from lightmem.cli.fluxmem_tables import ANALYSIS_DOC, DISTRACTORS, SPREADSHEET_DOC
from lightmem.fluxmem import Feedback, FluxMemAgent, StepResult, session
from lightmem.server.rest import create_app
from lightmem.server.tenancy import TenantPool, tenant_schema
from lightmem.store.base import MemoryStore
from lightmem.store.postgres import PostgresStore
from lightmem.store.sqlite import SQLiteStore
from lightmem.testing.live_server import LiveServer
from lightmem.types import Scope

TASK = "Which team has the most goals per player?"
DOCS = [SPREADSHEET_DOC, ANALYSIS_DOC, *DISTRACTORS]


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., MemoryStore]]:
    """Opens a new store object on database ``name`` each call (as separate instances
    would)."""
    opened: list[MemoryStore] = []
    run = uuid.uuid4().hex[:8]
    schemas: set[str] = set()

    def make(name: str = "tasks") -> MemoryStore:
        if request.param == "sqlite":
            store: MemoryStore = SQLiteStore(tmp_path / f"{name}.db")
        else:
            dsn = require_postgres()  # skips before a schema is noted for teardown
            schemas.add(f"test_{name}_{run}")
            store = PostgresStore(dsn, schema=f"test_{name}_{run}", pool_size=2)
        opened.append(store)
        return store

    yield make
    for s in opened:
        s.close()
    for schema in schemas:
        drop_schema(schema)


def _agent(
    store: MemoryStore, embedder: WordLlamaEmbedder, *, user_id: str | None = None
) -> FluxMemAgent:
    return FluxMemAgent.on_store(store, embedder, user_id=user_id)


SCRIPT = [
    StepResult("x", Feedback("noise", "the spreadsheet tool misled me"), False),
    StepResult("y", Feedback("missing", "how to normalise per player"), False),
    StepResult("Kenya", None, True, ("group rows by team", "divide goals by players")),
]


def test_a_session_continued_by_other_instances_matches_run_task(
    open_store: Callable[..., MemoryStore], embedder: WordLlamaEmbedder
) -> None:
    """Each step goes to a fresh store object (another worker): the contexts, attempts and
    repairs are exactly those of the same script run in one process by ``run_task`` on an
    identical graph."""
    reference = _agent(open_store("reference"), embedder)
    reference.add_knowledge(DOCS, source="handbook")
    seen: list[str] = []

    def scripted(ctx: str) -> StepResult:
        seen.append(ctx)
        return SCRIPT[len(seen) - 1]

    expected = reference.run_task(TASK, scripted)
    first = _agent(open_store(), embedder)
    first.add_knowledge(DOCS, source="handbook")
    shown: list[str] = []
    s = first.start_task(TASK)
    for reply in SCRIPT:
        assert s.id is not None and s.context is not None
        shown.append(s.context)
        with open_store() as worker_store:  # a new instance continues it
            s = _agent(worker_store, embedder).resume_task(s.id)
            assert s.context == shown[-1]
            s.report(reply)
        if s.outcome is not None:
            break
    got = s.outcome
    assert got is not None and expected.success and got.success and got.result == "Kenya"
    assert got.attempts == expected.attempts == len(shown) == len(seen) == 3
    assert [_no_ids(c) for c in shown] == [_no_ids(c) for c in seen]
    assert [(r.op, r.detail) for r in got.repairs] == [(r.op, r.detail) for r in expected.repairs]
    assert s.context is None
    episode = first.graph.get_node(got.episode_id)
    assert episode is not None and episode.data["status"] == "done"
    assert [a["attempt"] for a in episode.data["attempts"]] == [0, 1, 2]
    assert episode.data["trajectory"] == list(SCRIPT[-1].actions)
    steps = first.graph.edges("step", dst=[got.episode_id])
    assert steps and all(len(set(e.data["steps"])) == len(e.data["steps"]) for e in steps)
    # A finished session keeps its outcome until it expires (a lost answer can be asked again).
    done = first.resume_task(s.id or "")
    assert done.outcome == got and done.context is None and done.step == 3
    with pytest.raises(InvalidInputError, match="already finished"):
        done.report(SCRIPT[-1])


def _no_ids(context: str) -> str:
    return re.sub(r'id="[0-9a-f]{32}"', 'id=""', context)


def test_a_session_survives_closing_every_store(
    tmp_path: Path, embedder: WordLlamaEmbedder
) -> None:
    path = tmp_path / "restart.db"
    with FluxMemAgent.open(path) as a:
        a.add_knowledge(DOCS, source="handbook")
        s = a.start_task(TASK)
        sid = s.id
    assert sid is not None
    with FluxMemAgent.open(path) as b:
        again = b.resume_task(sid)
        assert again.context == s.context
        again.report(SCRIPT[0])
        assert again.outcome is None and again.context != s.context
    with FluxMemAgent.open(path) as c:
        last = c.resume_task(sid)
        last.report(SCRIPT[-1])
        assert last.outcome is not None and last.outcome.success
        assert [r.op for r in last.outcome.repairs] == ["link_prune"]
        assert c.graph.task_sessions().count(time.time()) == 0


def test_sessions_belong_to_the_scope_that_started_them(
    open_store: Callable[..., MemoryStore], embedder: WordLlamaEmbedder
) -> None:
    store = open_store()
    alice = _agent(store, embedder, user_id="alice")
    bob = _agent(store, embedder, user_id="bob")
    alice.add_knowledge(DOCS)
    s = alice.start_task(TASK)
    assert s.id is not None
    with pytest.raises(NotFoundError, match="session_id"):
        bob.resume_task(s.id)
    # The tenant's unscoped agent sees every session; the task keeps Alice's scope.
    tenant = _agent(store, embedder)
    t = tenant.resume_task(s.id)
    t.report(StepResult("ok", None, True))
    assert t.outcome is not None
    ep = alice.graph.get_node(t.outcome.episode_id)
    assert ep is not None and ep.scope == Scope("alice") and ep.data["status"] == "done"
    assert bob.stats()["episodic_nodes"] == 0


def test_one_step_at_a_time_and_a_dead_worker_frees_the_session(
    open_store: Callable[..., MemoryStore],
    embedder: WordLlamaEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = open_store()
    agent = _agent(store, embedder)
    agent.add_knowledge(DOCS)
    s = agent.start_task(TASK)
    assert s.id is not None
    sessions = store.graph().task_sessions()
    # Another worker is in the middle of a step of this task.
    assert sessions.claim(s.id, Scope(), "worker-2", time.time(), 60.0) is not None
    with pytest.raises(InvalidInputError, match="still running"):
        s.report(SCRIPT[0])
    sessions.release(s.id, "worker-2")
    s.report(SCRIPT[0])
    assert s.outcome is None
    # A worker killed mid-step holds its claim only for the lease.
    assert sessions.claim(s.id, Scope(), "killed", time.time(), 0.05) is not None
    time.sleep(0.1)
    s.report(SCRIPT[-1])
    assert s.outcome is not None and s.outcome.attempts == 2


def test_the_cap_holds_when_two_instances_pass_the_first_count_at_once(
    open_store: Callable[..., MemoryStore],
    embedder: WordLlamaEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The count before Stage I is only a fast path: the row is inserted under a lock that
    counts again, so an instance that counted before another inserted is refused, and the
    episode it opened is recorded as failed."""
    monkeypatch.setattr(session, "MAX_OPEN_SESSIONS", 1)
    a, b = _agent(open_store(), embedder), _agent(open_store(), embedder)
    assert a.start_task("task one").id
    # b counted while a's session was not yet there.
    monkeypatch.setattr(b.graph.task_sessions(), "count", lambda now: 0)
    with pytest.raises(InvalidInputError, match=r"^session: 1 task sessions are open"):
        b.start_task("task two")
    (lost,) = [n for n in b.graph.nodes("episodic", Scope()) if n.text == "task two"]
    assert lost.data["status"] == "done" and lost.data["success"] is False
    assert lost.data["attempts"][-1]["error"] == "too many open sessions"
    assert a.graph.task_sessions().count(time.time()) == 1


def test_the_cap_counts_sessions_of_every_instance(
    open_store: Callable[..., MemoryStore],
    embedder: WordLlamaEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session, "MAX_OPEN_SESSIONS", 2)
    a, b = _agent(open_store(), embedder), _agent(open_store(), embedder)
    open_ids = [a.start_task("task one").id, b.start_task("task two").id]
    assert all(open_ids)
    episodes = len(a.graph.nodes("episodic", Scope()))
    with pytest.raises(InvalidInputError, match=r"^session: 2 task sessions are open"):
        b.start_task("task three")
    assert len(a.graph.nodes("episodic", Scope())) == episodes  # refused before any work
    finished = a.resume_task(open_ids[1] or "")
    finished.report(StepResult("ok", None, True))
    assert b.start_task("task three").id


def test_idle_sessions_expire_and_their_episode_is_recorded_failed(
    open_store: Callable[..., MemoryStore],
    embedder: WordLlamaEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = _agent(open_store(), embedder)
    monkeypatch.setattr(session, "SESSION_TTL_S", 0.05)
    idle = a.start_task("an idle task")
    late = a.start_task("a late task")
    time.sleep(0.15)
    monkeypatch.setattr(session, "SESSION_TTL_S", 3600.0)
    with pytest.raises(NotFoundError, match="expired after"):  # and records it
        late.report(StepResult("too late", None, True))
    b = _agent(open_store(), embedder)
    assert b.start_task("a new task").id  # records the other expired one on the way
    for s in (idle, late):
        assert s.id is not None
        with pytest.raises(NotFoundError, match="session_id"):
            b.resume_task(s.id)
    done = [
        n for n in b.graph.nodes("episodic", Scope()) if n.text in {"an idle task", "a late task"}
    ]
    assert len(done) == 2
    for ep in done:
        assert ep.data["status"] == "done" and ep.data["success"] is False
        assert ep.data["attempts"][-1]["error"] == "session expired"
    assert b.graph.task_sessions().count(time.time()) == 1


# -- two REST apps over one store -------------------------------------------------------------
@pytest.fixture(params=["sqlite", "postgres"])
def two_pools(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], TenantPool]]:
    """Opens a new TenantPool (a new service instance) on the same data each call."""
    pools: list[TenantPool] = []
    server_schema = f"test_srv_{uuid.uuid4().hex[:10]}"

    def make() -> TenantPool:
        if request.param == "sqlite":
            p = TenantPool(tmp_path / "data")
        else:
            p = TenantPool(dsn=require_postgres(), server_schema=server_schema)
        pools.append(p)
        return p

    yield make
    for p in pools:
        p.close()
    if request.param == "postgres" and pools:  # none opened: skipped without PostgreSQL
        drop_schema(tenant_schema("acme", server_schema))
        drop_schema(server_schema)


def test_a_task_started_on_one_server_is_finished_on_another_and_after_a_restart(
    two_pools: Callable[[], TenantPool],
) -> None:
    pool_a, pool_b = two_pools(), two_pools()
    keys = pool_a.keys()
    key = keys.create("acme")
    keys_b = pool_b.keys()
    try:
        with (
            LiveServer(create_app(pool_a, keys)) as url_a,
            LiveServer(create_app(pool_b, keys_b)) as url_b,
        ):
            a = httpx.Client(base_url=url_a, headers={"X-API-Key": key}, timeout=60)
            b = httpx.Client(base_url=url_b, headers={"X-API-Key": key}, timeout=60)
            assert a.post("/v1/fluxmem/knowledge", json={"docs": DOCS}).status_code == 200
            start = a.post("/v1/fluxmem/tasks", json={"task": TASK}).json()
            sid = start["session_id"]
            noise = {"kind": "noise", "detail": "the spreadsheet tool misled me"}
            step = b.post(
                f"/v1/fluxmem/tasks/{sid}/steps", json={"success": False, "feedback": noise}
            )
            assert step.status_code == 200, step.text
            assert step.json()["outcome"] is None and step.json()["context"] != start["context"]
            second = b.post("/v1/fluxmem/tasks", json={"task": TASK.replace("most", "fewest")})
            sid2 = second.json()["session_id"]
            a.close()
            b.close()
    finally:
        keys_b.close()
    pool_a.close()
    pool_b.close()
    # Both servers are gone; a new one continues both tasks.
    pool_c = two_pools()
    keys_c = pool_c.keys()
    try:
        with LiveServer(create_app(pool_c, keys_c)) as url_c:
            c = httpx.Client(base_url=url_c, headers={"X-API-Key": key}, timeout=60)
            done = c.post(f"/v1/fluxmem/tasks/{sid}/steps", json={"success": True}).json()
            assert done["outcome"]["success"] and done["outcome"]["attempts"] == 2
            assert [r["op"] for r in done["outcome"]["repairs"]] == ["link_prune"]
            r = c.post(f"/v1/fluxmem/tasks/{sid}/steps", json={"success": True})
            assert r.status_code == 422 and "already finished" in r.json()["error"]["message"]
            other = c.post(f"/v1/fluxmem/tasks/{sid2}/steps", json={"success": True}).json()
            assert other["outcome"]["success"] and other["outcome"]["attempts"] == 1
            c.close()
    finally:
        keys_c.close()
        keys.close()


_VICTIM = """
import sys, time
from lightmem.fluxmem import Feedback, FluxMemAgent, OfflineReasoner, StepResult, session
session.STEP_LEASE_S = 0.5  # this worker's claims end soon after it dies

class HangsInItsSecondStep(OfflineReasoner):  # so the kill lands mid-step on any machine
    calls = 0

    def attribute(self, task, feedback):
        self.calls += 1
        if self.calls == 2:
            print("mid-step", flush=True)
            time.sleep(600)
        return super().attribute(task, feedback)

agent = FluxMemAgent.open(sys.argv[1], reasoner=HangsInItsSecondStep())
s = agent.resume_task(sys.argv[2])
for i in range(2):
    s.report(StepResult(i, Feedback("missing", f"detail {i} about players"), False))
    print("ack", flush=True)
"""


def test_a_worker_killed_mid_step_leaves_a_session_others_can_finish(tmp_path: Path) -> None:
    import subprocess
    import sys

    from lightmem.store.sqlite_db import SQLiteDatabase

    path = tmp_path / "killed.db"
    with FluxMemAgent.open(path) as a:
        a.add_knowledge(DOCS)
        sid = a.start_task(TASK, max_rounds=100).id
    assert sid is not None
    proc = subprocess.Popen(
        [sys.executable, "-c", _VICTIM, str(path), sid], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ack"  # one step done
    assert proc.stdout.readline().strip() == "mid-step"  # the next one holds its claim
    proc.kill()
    proc.wait(timeout=30)
    with FluxMemAgent.open(path) as b:
        deadline = time.monotonic() + 30
        while True:
            try:
                s = b.resume_task(sid)
                s.report(StepResult("done", None, True))
                break
            except InvalidInputError as exc:  # the dead worker's claim, until its lease ends
                assert "still running" in str(exc) and time.monotonic() < deadline
                time.sleep(0.2)
        assert s.outcome is not None and s.outcome.success and s.outcome.attempts >= 2
        ep = b.graph.get_node(s.outcome.episode_id)
        assert ep is not None and ep.data["status"] == "done"
        db = b.graph.db  # type: ignore[attr-defined]
        assert isinstance(db, SQLiteDatabase)
        with db.read() as c:
            assert c.all("PRAGMA integrity_check") == [("ok",)]
            n, v, f = (
                c.one(f"SELECT count(*) FROM {t}")[0]
                for t in ("graph_nodes", "graph_vectors", "graph_fts")
            )
            assert n == v == f

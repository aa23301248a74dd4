"""Task sessions: a FluxMem task driven step by step from outside (REST, MCP, another
process), its state kept in the store between steps (:mod:`lightmem.store.sessions`).

Any agent on the same store continues a session by its id, so a task started on one
service instance can be finished on another or after a restart. Open sessions are capped
per store (:data:`MAX_OPEN_SESSIONS`) and expire :data:`SESSION_TTL_S` seconds after their
last step; an expired session's episode is recorded as failed ("session expired") by the
next ``start_task`` on that store or by the next attempt to continue it.

Reporting a step is idempotent when the client numbers it (``report(result, step=n)``,
REST and MCP ``step``; a :class:`TaskSession` numbers its own reports): a step the store
already applied, reported again with the same result because its answer was lost, gets
the recorded answer (the next context, or the outcome, which a finished session keeps
until it expires) and is not applied twice; the same number with another result, or a
number that is not the next step, is an ``InvalidInputError`` naming ``step``.

As in ``run_task``, lightmem's own error that ends a task (a ``BackendError`` from the
reasoner, a ``StoreError``) is raised as itself from ``start_task`` or ``report``, after
the episode is recorded as failed and the outcome saved; the session keeps the error as
text in ``outcome.error``, which reporting the same step again answers.
"""

from __future__ import annotations

import time
import uuid

from lightmem.errors import InvalidInputError, NotFoundError, StoreError, StoreFullError
from lightmem.fluxmem.records import Crash
from lightmem.fluxmem.task_flow import (
    TaskFlow,
    TaskState,
    outcome_from_record,
    raise_failure,
    step_key,
    to_row,
)
from lightmem.fluxmem.types import StepResult, TaskOutcome
from lightmem.sanitize import check_value
from lightmem.store.sessions import SessionRow, TaskSessionStore
from lightmem.types import Scope

__all__ = [
    "MAX_OPEN_SESSIONS",
    "MAX_STEP",
    "SESSION_TTL_S",
    "STEP_LEASE_S",
    "TaskSession",
    "TaskSessions",
]

#: Open (unexpired) task sessions per store: each holds its task, attempts and context, so
#: a client cannot grow the store without bound; past it ``start_task`` is refused.
MAX_OPEN_SESSIONS = 100
#: Seconds a session may stay idle between two steps before it expires.
SESSION_TTL_S = 3600.0
#: Seconds one step holds its session (no other step of that task runs meanwhile); a
#: worker killed mid-step frees it after that.
STEP_LEASE_S = 600.0
#: The largest step number a client may report (more than any task's rounds allow).
MAX_STEP = 1_000
_SWEEP = 20  # expired sessions recorded per start_task, so one call's work stays bounded


class TaskSessions:
    """Starts, continues and expires the task sessions of one agent's store and scope
    (an agent's scope sees the sessions it would see as graph rows: its own, or every
    one for the default scope)."""

    def __init__(self, flow: TaskFlow, store: TaskSessionStore, scope: Scope) -> None:
        self._flow = flow
        self._store = store
        self._scope = scope

    def start(self, task: str, max_rounds: int | None) -> TaskSession:
        now = time.time()
        self.expire_idle(now)
        if self._store.count(now) >= MAX_OPEN_SESSIONS:
            raise _too_many()
        state = self._flow.begin(task, self._scope, max_rounds)
        if state.outcome is not None:  # Stage I failed: raised, as run_task does
            raise_failure(state)
            return TaskSession(self, None, None, state.outcome)
        sid, now = uuid.uuid4().hex, time.time()
        if not self._store.open(to_row(sid, state, now, SESSION_TTL_S), MAX_OPEN_SESSIONS, now):
            self._flow.advance(state, Crash("too many open sessions"))  # others took the room
            raise _too_many()
        return TaskSession(self, sid, state.context)

    def resume(self, session_id: str) -> TaskSession:
        row = self._live_row(_session_id(session_id), time.time())
        return TaskSession(self, row.id, *_view(row))

    def step(
        self, session_id: str, reply: StepResult | Crash, expected: int | None
    ) -> tuple[str | None, TaskOutcome | None, int]:
        """Claim the session, advance its task with ``reply``, store the new state; returns
        the next context, the outcome and the number of steps recorded. ``expected``: the
        number of the step being reported (steps recorded so far); a step already applied
        with the same report is answered from the row, not applied again."""
        key, token, now = step_key(reply), uuid.uuid4().hex, time.time()
        row = self._store.claim(session_id, self._scope, token, now, STEP_LEASE_S)
        if row is None:
            row = self._live_row(session_id, now)  # unknown or expired: says so
            if expected is not None and _replays(row, expected, key):
                return _view(row)
            if row.outcome is not None:
                raise _conflict(row, expected) if expected is not None else _finished()
            raise InvalidInputError(
                f"session_id: another step of task session {session_id!r} is still running; "
                "report again once it has answered"
            )
        if expected is not None and expected != row.attempt:
            self._store.release(row.id, token)
            if _replays(row, expected, key):
                return _view(row)
            raise _conflict(row, expected)
        if isinstance(reply, StepResult):  # a step adds its trajectory; abandoning never is
            try:
                self._flow.graph.check_room()
            except StoreFullError:
                self._store.release(row.id, token)
                raise
        state = self._advance(row, reply, token)
        if not self._store.save(to_row(session_id, state, time.time(), SESSION_TTL_S, key), token):
            raise StoreError(
                f"session_id: this step of task session {session_id!r} outlived its "
                f"{STEP_LEASE_S:.0f} s lease and the session was taken over; it was not saved"
            )
        # As run_task: lightmem's own error that ended the task is raised once the outcome
        # is saved; the step reported again gets that outcome (its error as text).
        raise_failure(state)
        return state.context or None, state.outcome, state.attempt

    def end_showing(self, node_id: str, reason: str) -> int:
        """Finish, as failed with ``reason``, the open sessions of this scope that show
        node ``node_id`` (it is its episode or in its subgraph), so their episodes are
        recorded before the node is erased; returns how many. A session whose step is
        running is left to the erasure, which removes it."""
        ended, now = 0, time.time()
        for sid in self._store.showing(node_id, self._scope, now):
            token = uuid.uuid4().hex
            row = self._store.claim(sid, self._scope, token, now, STEP_LEASE_S)
            if row is None:
                continue
            state = self._advance(row, Crash(reason), token)
            ended += self._store.save(to_row(sid, state, time.time(), SESSION_TTL_S), token)
        return ended

    def expire_idle(self, now: float) -> int:
        """Record the episodes of (a bounded number of) expired sessions as failed, and
        remove finished sessions whose time is up."""
        ids = self._store.expired(now, _SWEEP)
        return sum(self._expire(sid, now) for sid in ids)

    def _expire(self, session_id: str, now: float) -> bool:
        token = uuid.uuid4().hex
        row = self._store.claim_expired(session_id, token, now, STEP_LEASE_S)
        if row is None:  # another instance is recording it, or it was continued meanwhile
            return False
        if row.outcome is None:  # finished tasks have recorded their episode already
            self._advance(row, Crash("session expired"), token)
        self._store.finish(session_id, token)
        return True

    def _advance(self, row: SessionRow, reply: StepResult | Crash, token: str) -> TaskState:
        try:
            return self._flow.advance(self._flow.from_row(row), reply)
        except BaseException:
            self._store.release(row.id, token)  # so the step can be reported again
            raise

    def _live_row(self, session_id: str, now: float) -> SessionRow:
        row = self._store.get(session_id, self._scope)
        if row is None:
            raise _unknown(session_id)
        if row.expires_at <= now:
            self._expire(row.id, now)
            raise _expired(session_id) if row.outcome is None else _unknown(session_id)
        return row


class TaskSession:
    """One task run in progress; see :meth:`FluxMemAgent.start_task`. Its state lives in
    the store: :meth:`FluxMemAgent.resume_task` gives the same session by :attr:`id` in
    any process on that store."""

    def __init__(
        self,
        sessions: TaskSessions,
        session_id: str | None,
        context: str | None,
        outcome: TaskOutcome | None = None,
        step: int = 0,
    ) -> None:
        self._sessions = sessions
        #: The session's id (None when the task finished before its first step).
        self.id = session_id
        self.context = context
        self.outcome = outcome
        #: Steps recorded so far: the number of the next step to report.
        self.step = step

    def report(self, result: StepResult, *, step: int | None = None) -> None:
        """Feed back the result of acting on :attr:`context`. ``step`` (default
        :attr:`step`) is the number of the step reported: if the store already recorded
        that step with the same result (its answer was lost), the recorded answer is
        taken instead of applying it again; any other mismatch is an InvalidInputError."""
        if not isinstance(result, StepResult):
            raise InvalidInputError(f"result: expected a StepResult, got {type(result).__name__}")
        check_value(result, "result", strict=False)
        self._send(result, self.step if step is None else _step_number(step))

    def abandon(self, reason: str = "abandoned by the client") -> None:
        """Give up: the episode is recorded as failed with ``reason``."""
        if not isinstance(reason, str):
            raise InvalidInputError("reason: expected a string")
        check_value(reason, "reason", strict=False)
        self._send(Crash(reason), self.step)

    def _send(self, reply: StepResult | Crash, step: int) -> None:
        if self.id is None or (self.outcome is not None and step >= self.step):
            raise _finished()
        self.context, self.outcome, self.step = self._sessions.step(self.id, reply, step)


def _view(row: SessionRow) -> tuple[str | None, TaskOutcome | None, int]:
    """What a session row answers: the next context, the outcome, the steps recorded."""
    outcome = None if row.outcome is None else outcome_from_record(row.outcome)
    return (row.context or None) if outcome is None else None, outcome, row.attempt


def _replays(row: SessionRow, expected: int, key: str) -> bool:
    """True when step ``expected`` with digest ``key`` is the last step ``row`` applied."""
    return expected == row.attempt - 1 and bool(row.step_key) and key == row.step_key


def _conflict(row: SessionRow, expected: int) -> InvalidInputError:
    if expected == row.attempt - 1:
        then = "the task has finished" if row.outcome is not None else f"next is {row.attempt}"
        return InvalidInputError(
            f"step: step {expected} of task session {row.id!r} was already recorded with a "
            f"different result; {then}"
        )
    if row.outcome is not None:
        return InvalidInputError(
            f"step: task session {row.id!r} finished after {row.attempt} steps; "
            f"step {expected} cannot be recorded"
        )
    return InvalidInputError(
        f"step: task session {row.id!r} has recorded {row.attempt} steps, so the next is "
        f"step {row.attempt}, not {expected}"
    )


def _step_number(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_STEP:
        raise InvalidInputError(f"step: expected an integer in [0, {MAX_STEP}]")
    return value


def _finished() -> InvalidInputError:
    return InvalidInputError("session: the task has already finished")


def _session_id(value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 100:
        raise InvalidInputError("session_id: expected a session id string")
    check_value(value, "session_id")
    return value


def _unknown(session_id: str) -> NotFoundError:
    return NotFoundError(f"session_id: no task session {session_id!r}")


def _expired(session_id: str) -> NotFoundError:
    return NotFoundError(
        f"session_id: task session {session_id!r} expired after {SESSION_TTL_S:.0f} s "
        "without a step; its episode is recorded as failed"
    )


def _too_many() -> InvalidInputError:
    return InvalidInputError(
        f"session: {MAX_OPEN_SESSIONS} task sessions are open on this store (the cap); "
        f"finish one or let idle ones expire ({SESSION_TTL_S:.0f} s)"
    )

"""Task sessions: a FluxMem task driven step by step from outside (REST, MCP, another
process), its state kept in the store between steps (:mod:`lightmem.store.sessions`).

Any agent on the same store continues a session by its id, so a task started on one
service instance can be finished on another or after a restart. Open sessions are capped
per store (:data:`MAX_OPEN_SESSIONS`) and expire :data:`SESSION_TTL_S` seconds after their
last step; an expired session's episode is recorded as failed ("session expired") by the
next ``start_task`` on that store or by the next attempt to continue it.
"""

from __future__ import annotations

import time
import uuid

from lightmem.errors import InvalidInputError, NotFoundError, StoreError
from lightmem.fluxmem.records import Crash
from lightmem.fluxmem.task_flow import TaskFlow, TaskState, to_row
from lightmem.fluxmem.types import StepResult, TaskOutcome
from lightmem.sanitize import check_value
from lightmem.store.sessions import SessionRow, TaskSessionStore
from lightmem.types import Scope

#: Open (unexpired) task sessions per store: each holds its task, attempts and context, so
#: a client cannot grow the store without bound; past it ``start_task`` is refused.
MAX_OPEN_SESSIONS = 100
#: Seconds a session may stay idle between two steps before it expires.
SESSION_TTL_S = 3600.0
#: Seconds one step holds its session (no other step of that task runs meanwhile); a
#: worker killed mid-step frees it after that.
STEP_LEASE_S = 600.0
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
        if state.outcome is not None:
            return TaskSession(self, None, None, state.outcome)
        sid, now = uuid.uuid4().hex, time.time()
        if not self._store.open(to_row(sid, state, now, SESSION_TTL_S), MAX_OPEN_SESSIONS, now):
            self._flow.advance(state, Crash("too many open sessions"))  # others took the room
            raise _too_many()
        return TaskSession(self, sid, state.context)

    def resume(self, session_id: str) -> TaskSession:
        row = self._live_row(_session_id(session_id), time.time())
        return TaskSession(self, row.id, row.context)

    def step(self, session_id: str, reply: StepResult | Crash) -> TaskState:
        """Claim the session, advance its task with ``reply``, store the new state."""
        token, now = uuid.uuid4().hex, time.time()
        row = self._store.claim(session_id, self._scope, token, now, STEP_LEASE_S)
        if row is None:
            self._live_row(session_id, now)  # unknown or expired: says so
            raise InvalidInputError(
                f"session_id: another step of task session {session_id!r} is still running; "
                "report again once it has answered"
            )
        state = self._advance(row, reply, token)
        if state.outcome is not None:
            self._store.finish(session_id, token)
        elif not self._store.save(to_row(session_id, state, time.time(), SESSION_TTL_S), token):
            raise StoreError(
                f"session_id: this step of task session {session_id!r} outlived its "
                f"{STEP_LEASE_S:.0f} s lease and the session was taken over; it was not saved"
            )
        return state

    def expire_idle(self, now: float) -> int:
        """Record the episodes of (a bounded number of) expired sessions as failed."""
        ids = self._store.expired(now, _SWEEP)
        return sum(self._expire(sid, now) for sid in ids)

    def _expire(self, session_id: str, now: float) -> bool:
        token = uuid.uuid4().hex
        row = self._store.claim_expired(session_id, token, now, STEP_LEASE_S)
        if row is None:  # another instance is recording it, or it was continued meanwhile
            return False
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
            raise _expired(session_id)
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
    ) -> None:
        self._sessions = sessions
        #: The session's id (None when the task finished before its first step).
        self.id = session_id
        self.context = context
        self.outcome = outcome

    def report(self, result: StepResult) -> None:
        """Feed back the result of acting on :attr:`context`."""
        if not isinstance(result, StepResult):
            raise InvalidInputError(f"result: expected a StepResult, got {type(result).__name__}")
        check_value(result, "result", strict=False)
        self._send(result)

    def abandon(self, reason: str = "abandoned by the client") -> None:
        """Give up: the episode is recorded as failed with ``reason``."""
        if not isinstance(reason, str):
            raise InvalidInputError("reason: expected a string")
        check_value(reason, "reason", strict=False)
        self._send(Crash(reason))

    def _send(self, reply: StepResult | Crash) -> None:
        if self.outcome is not None or self.id is None:
            raise InvalidInputError("session: the task has already finished")
        state = self._sessions.step(self.id, reply)
        self.context, self.outcome = state.context or None, state.outcome


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

"""The ``lightmem`` commands that work on one store: add, search, list, show, history,
update, delete, restore, purge, offline-update, summarize, stats."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from lightmem.cli.args import global_options
from lightmem.cli.files import decode_text, numbered_messages
from lightmem.cli.output import (
    one_line,
    print_entries,
    print_entry,
    print_history,
    print_json,
    print_results,
    short_id,
)
from lightmem.errors import InvalidInputError, NotFoundError
from lightmem.fluxmem import FluxMemAgent
from lightmem.memory import LightMemory
from lightmem.pipeline.messages import assign_ids
from lightmem.types import MemoryEntry

__all__ = ["check_args", "resolve_id", "run", "scope_of"]

#: Sorts undated memories last.
_LAST = datetime.max.replace(tzinfo=UTC)
#: Entries scanned per page when a short id is resolved to a full one.
_PAGE = 1000
#: The length of the ids lightmem makes (32 hex digits); an imported id may be shorter.
_ID_LENGTH = 32


def scope_of(args: argparse.Namespace) -> dict[str, Any]:
    return {"user_id": args.user_id, "agent_id": args.agent_id, "run_id": args.run_id}


def check_args(args: argparse.Namespace) -> None:
    """Refuse what is wrong with the arguments alone, before the store is opened: opening
    creates a store file that does not exist yet (``add`` and ``purge`` may do that). For
    ``add`` that is the file too: it is read and every message checked here, and kept in
    ``args.messages``, so a file that cannot be added leaves no new store behind."""
    if args.command == "add":
        raw, lines = _read_messages(args.file)
        # Ids are those of each turn's place in its batch (what earlier versions stored, so
        # re-adding a file they added is still a no-op), but a turn repeated at the same
        # place of two batches ("thanks") is two turns: the repeat takes its place in the
        # file. assign_ids also makes add_memory's checks, naming positions in the file.
        try:
            args.messages = assign_ids(raw, batch=args.batch)
        except InvalidInputError as exc:
            raise _on_line(exc, args.file, lines) from None
        return
    if args.command != "purge":
        return
    if args.node is not None and args.id is not None:
        raise InvalidInputError("--node: give an entry id or --node, not both")
    if args.id is None and args.node is None and all(v is None for v in scope_of(args).values()):
        # The library's field name and refusal, raised before the store is opened.
        raise InvalidInputError(
            "entry_id: give an id, --node NODE_ID, or a scope to erase "
            "(--user-id / --agent-id / --run-id)"
        )


def run(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    command = args.command.replace("-", "_")
    handler = globals().get(f"_cmd_{command}")
    if handler is None:  # pragma: no cover - the parser only knows these commands
        raise InvalidInputError(f"command: unknown command {args.command!r}")
    result: int = handler(mem, args, out)
    return result


def resolve_id(mem: LightMemory, given: str, scope: dict[str, Any]) -> str:
    """``given`` itself when it is an entry's id, else the one live entry whose id starts
    with it (the short ids the commands print)."""
    try:
        return mem.get(given, **scope).id
    except NotFoundError:
        pass
    matches: list[str] = []
    offset = 0
    kinds = {"kind": ["entry", "event", "summary"]}
    while True:
        page = mem.list_entries(kinds, limit=_PAGE, offset=offset, **scope)
        matches += [e.id for e in page if e.id.startswith(given)]
        if len(page) < _PAGE or len(matches) > 1:
            break
        offset += _PAGE
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise InvalidInputError(f"id: {given!r} matches several memories; give more of it")
    raise NotFoundError(f"id: no memory entry {given!r} in this scope{_deleted_hint(given)}")


def _deleted_hint(given: str) -> str:
    """What to say of an id that names no memory when it may be a deleted one's short id
    (a deleted memory is no longer listed, so a short id cannot be completed)."""
    if len(given) >= _ID_LENGTH:
        return ""
    return " (a deleted memory needs its full id, as 'delete' printed it)"


def _cmd_add(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    from tqdm import tqdm

    messages: list[Any] = args.messages  # read and checked by check_args
    created: list[str] = []
    added = 0
    scope = scope_of(args)
    with tqdm(total=len(messages), unit="msg", disable=len(messages) < 200, file=sys.stderr) as bar:
        for batch in _batches(messages, args.batch):
            result = mem.add_memory(batch, **scope)
            created += result.entries_created
            added += result.messages_added
            bar.update(len(batch))
    if not args.no_flush:
        created += mem.flush(**scope).entries_created
    kinds = [e.kind for e in mem.store.get_entries(created).values()]
    summaries = kinds.count("summary")
    report = {
        "messages": len(messages),
        "messages_added": added,
        "entries_created": len(created),
        "facts": len(created) - summaries,
        "topic_summaries": summaries,
    }
    if args.json:
        print_json(out, report)
        return 0
    out.write(
        f"Added {added} of {len(messages)} messages ({len(messages) - added} already stored). "
        f"Created {len(created)} memories: {len(created) - summaries} from the messages and "
        f"{summaries} topic summar{'y' if summaries == 1 else 'ies'}.\n"
    )
    if args.no_flush:
        out.write("Messages still in the buffers are extracted by the next add or flush.\n")
    return 0


def _cmd_search(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    filters = {"speaker": args.speaker} if args.speaker else None
    kw: dict[str, Any] = {
        "limit": args.limit,
        "filters": filters,
        "mode": args.mode,
        "budget_tokens": args.budget_tokens,
        "all_scopes": args.all_scopes,
        **scope_of(args),
    }
    if args.context:
        context = mem.retrieve_context(args.query, **kw)
        out.write((context or "No memory matches this query in this scope.") + "\n")
        return 0
    print_results(out, mem.retrieve(args.query, **kw), args.json)
    return 0


def _cmd_list(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    filters: dict[str, Any] = {}
    if args.kind:
        filters["kind"] = args.kind
    if args.speaker:
        filters["speaker"] = args.speaker
    entries = mem.list_entries(
        filters or None,
        limit=args.limit,
        offset=args.offset,
        all_scopes=args.all_scopes,
        **scope_of(args),
    )
    print_entries(out, entries, args.json, "No memories in this scope.")
    if not args.json and len(entries) == args.limit:
        out.write(f"(more: --offset {args.offset + args.limit})\n")
    return 0


def _cmd_show(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    scope = scope_of(args)
    eid = resolve_id(mem, args.id, scope)
    entry = mem.get(eid, **scope)
    sources = [
        {"id": m.id, "speaker": m.speaker, "content": m.content, "time": m.time_text}
        for m in mem.sources(eid, **scope)
    ]
    if args.json:
        print_json(out, {**entry.to_dict(), "sources": sources})
    else:
        print_entry(out, entry, sources)
    return 0


def _cmd_history(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    scope = scope_of(args)
    events = mem.history(_resolve_any(mem, args.id, scope), **scope)
    if args.json:
        print_json(out, [ev.to_dict() for ev in events])
    else:
        print_history(out, events)
    return 0


def _cmd_update(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    scope = scope_of(args)
    entry = mem.update(resolve_id(mem, args.id, scope), args.text, **scope)
    line = f"Updated [{short_id(entry.id)}] to version {entry.version}: {_said(entry)}"
    return _emit(out, args, entry.to_dict(), line)


def _cmd_delete(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    scope = scope_of(args)
    entry = mem.delete(resolve_id(mem, args.id, scope), **scope)
    # The full id (a deleted memory's short id is refused) and the options that reached it.
    line = (
        f"Deleted [{short_id(entry.id)}]; undo with: "
        f"lightmem {global_options(args)} restore {entry.id}"
    )
    return _emit(out, args, {"deleted": entry.id}, line)


def _cmd_restore(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    scope = scope_of(args)
    try:
        entry = mem.restore(_resolve_any(mem, args.id, scope), args.version, **scope)
    except NotFoundError as exc:
        # an id of a deleted memory must be whole: a short one cannot be completed
        raise NotFoundError(f"{exc}{_deleted_hint(args.id)}") from exc
    line = f"Restored [{short_id(entry.id)}] as version {entry.version}: {_said(entry)}"
    return _emit(out, args, entry.to_dict(), line)


def _cmd_purge(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    scope = scope_of(args)
    if args.node is not None:
        agent = FluxMemAgent.on_store(mem.store, mem.embedder, **scope)
        report = agent.purge(args.node)
    else:
        eid = None if args.id is None else _resolve_any(mem, args.id, scope)
        report = mem.purge(eid, **scope)
    if args.json:
        print_json(out, report.to_dict())
        return 0
    rows = ", ".join(f"{n} {table}" for table, n in report.removed.items() if n) or "nothing"
    out.write(f"Erased {report.target} for good: {rows}.\n")
    return 0


def _cmd_offline_update(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    scope = scope_of(args)
    queued = mem.construct_update_queue_all_entries(args.top_k, args.keep_top_n, **scope)
    report = mem.offline_update_all_entries(args.score_threshold, recheck=args.recheck, **scope)
    if args.json:
        print_json(out, {"queued": queued, **report.to_dict()})
        return 0
    out.write(
        f"Queued {queued} memories with their nearest neighbours; compared {report.pairs} "
        f"pairs above similarity {args.score_threshold}: {len(report.updated)} updated, "
        f"{len(report.deleted)} deleted, {len(report.superseded)} superseded"
        + (
            f"; {report.skipped} seen before unchanged (--recheck shows them again)"
            if report.skipped
            else ""
        )
        + ".\n"
    )
    return 0


def _said(entry: MemoryEntry) -> str:
    """A memory's own words on one line, as lists print them (not the compact prompt text)."""
    return one_line(entry.original_text or entry.text)


def _cmd_summarize(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    scope = scope_of(args)
    report = mem.summarize(args.window, "historical" if args.historical else "global", **scope)
    if args.json:
        print_json(out, report.to_dict())
        return 0
    ids = [*report.created, *report.updated]
    out.write(
        f"{report.windows} time windows: {len(report.created)} summaries written, "
        f"{len(report.updated)} updated.\n"
    )
    written = sorted(mem.store.get_entries(ids).values(), key=lambda e: e.timestamp or _LAST)
    print_entries(out, written, False, "")
    return 0


def _cmd_stats(mem: LightMemory, args: argparse.Namespace, out: TextIO) -> int:
    stats = mem.stats(**scope_of(args))
    if args.json:
        print_json(out, stats)
        return 0
    usage = stats.pop("usage")["total"]
    for key, value in stats.items():
        out.write(f"{key + ':':<20}{value}\n")
    out.write(
        f"{'model usage:':<20}{usage['calls']} calls, {usage['items']} items, "
        f"{usage.get('prompt_tokens', 0)} prompt tokens (--json for each operation)\n"
    )
    return 0


def _emit(out: TextIO, args: argparse.Namespace, data: Any, line: str) -> int:
    """``data`` as JSON under ``--json``, else the one ``line`` for people."""
    if args.json:
        print_json(out, data)
    else:
        out.write(line + "\n")
    return 0


def _resolve_any(mem: LightMemory, given: str, scope: dict[str, Any]) -> str:
    """Like :func:`resolve_id`, but a full id of a deleted memory passes unchanged (its
    history and restore still work)."""
    try:
        return resolve_id(mem, given, scope)
    except NotFoundError:
        return given


_MESSAGE_AT = re.compile(r"messages\[(\d+)\]")


def _on_line(exc: InvalidInputError, path: str, lines: list[int] | None) -> InvalidInputError:
    """``exc`` naming, in a JSONL file, the line of the message it names by position."""
    m = _MESSAGE_AT.match(str(exc))
    if lines is None or m is None or int(m.group(1)) >= len(lines):
        return exc
    name = "standard input" if path == "-" else path
    return InvalidInputError(f"file: {name} line {lines[int(m.group(1))]}: {exc}")


def _read_messages(path: str) -> tuple[list[Any], list[int] | None]:
    name = "standard input" if path == "-" else path
    try:
        if path == "-":
            # The bytes when there are any (so a byte-order mark is seen), else the text.
            raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
        else:
            raw = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"file: cannot read {path}: {exc}") from exc
    text = decode_text(raw, name) if isinstance(raw, bytes) else raw
    return numbered_messages(text, name)


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]

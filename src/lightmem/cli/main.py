"""``lightmem`` command line: demo, add, search, show, history, purge, stats, bench."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from lightmem.cli.args import count, load_config
from lightmem.cli.bench import add_bench_parser, run_bench
from lightmem.errors import InvalidInputError, LightMemError
from lightmem.memory import LightMemory

_DSN_HELP = "PostgreSQL DSN: tenants and keys there instead of --data-dir (or $LIGHTMEM_PG_DSN)"


def _tenant_args(p: argparse.ArgumentParser, data_help: str = "tenant stores and keys") -> None:
    """``--data-dir`` and ``--dsn``, shared by every command that serves or manages tenants."""
    p.add_argument(
        "--data-dir", default=os.environ.get("LIGHTMEM_DATA_DIR", "lightmem-data"), help=data_help
    )
    p.add_argument("--dsn", default=None, help=_DSN_HELP)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lightmem", description="Light, structured long-term memory for LLM agents."
    )
    p.add_argument(
        "--store",
        default=None,
        help="SQLite store file (default: $LIGHTMEM_STORE or ./lightmem.db); read commands "
        "refuse a file that does not exist",
    )
    p.add_argument("--config", help="JSON file in the LightMemory.from_config shape")
    p.add_argument("--user-id")
    p.add_argument("--agent-id")
    p.add_argument("--run-id")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="offline demos: lightmem (default) or fluxmem")
    d.add_argument("which", nargs="?", default="lightmem", choices=["lightmem", "fluxmem"])

    a = sub.add_parser("add", help="add a conversation from a JSON or JSONL file ('-' = stdin)")
    a.add_argument("file")
    a.add_argument("--batch", type=count(1), default=64, help="messages per add_memory call")
    a.add_argument("--no-flush", action="store_true", help="leave the tail buffered")

    s = sub.add_parser("search", help="retrieve memories for a query")
    s.add_argument("query")
    s.add_argument("--limit", type=count(1), default=10)
    s.add_argument("--mode", choices=["embedding", "context", "hybrid", "hierarchical"])
    s.add_argument("--budget-tokens", type=count(1))
    s.add_argument("--speaker")
    s.add_argument("--context", action="store_true", help="print formatted prompt context")

    sh = sub.add_parser("show", help="show one entry with its source turns")
    sh.add_argument("id")

    h = sub.add_parser("history", help="show the change history of one entry")
    h.add_argument("id")

    pu = sub.add_parser(
        "purge", help="erase one entry, or everything in --user-id/--agent-id/--run-id, for good"
    )
    pu.add_argument("id", nargs="?", help="the entry to erase (omit to erase the whole scope)")

    sub.add_parser("stats", help="counts and model usage of the store")

    sv = sub.add_parser("serve", help="REST API and viewer (/ui); needs lightmem[server]")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8765)
    _tenant_args(sv)
    sv.add_argument("--max-body-mb", type=float, default=8.0)
    sv.add_argument(
        "--workers", type=count(1), default=1, help="server processes (share the files)"
    )

    mc = sub.add_parser("mcp", help="MCP server: stdio (the --store file) or streamable HTTP")
    mc.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    mc.add_argument("--host", default="127.0.0.1")
    mc.add_argument("--port", type=int, default=8766)
    _tenant_args(mc, "tenant stores and keys (http)")

    ks = sub.add_parser("keys", help="API keys for the HTTP servers")
    ksub = ks.add_subparsers(dest="keys", required=True)
    kc = ksub.add_parser("create", help="create a key for a tenant (printed once)")
    kc.add_argument("--tenant", required=True)
    _tenant_args(kc)
    kl = ksub.add_parser("list", help="list keys (prefixes only)")
    _tenant_args(kl)
    kr = ksub.add_parser("revoke", help="revoke a key by its prefix")
    kr.add_argument("prefix")
    _tenant_args(kr)

    mg = sub.add_parser("migrate", help="copy a SQLite store to PostgreSQL, then verify it")
    mg.add_argument("--from", dest="source", required=True, help="sqlite:PATH")
    mg.add_argument("--to", dest="target", required=True, help="postgres:DSN")
    mg.add_argument("--schema", default="lightmem")
    mg.add_argument("--skip-graph", action="store_true", help="migrate without the FluxMem graph")

    add_bench_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except LightMemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _scope(args: argparse.Namespace) -> dict[str, Any]:
    return {"user_id": args.user_id, "agent_id": args.agent_id, "run_id": args.run_id}


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        if args.which == "fluxmem":
            from lightmem.cli import demo_fluxmem

            demo_fluxmem.run(sys.stdout)
        else:
            from lightmem.cli import demo

            demo.run(sys.stdout)
        return 0
    if args.command == "bench":
        return run_bench(args)
    if args.command == "migrate":
        from lightmem.store.migrate import migrate

        report = migrate(args.source, args.target, schema=args.schema, skip_graph=args.skip_graph)
        print(json.dumps(report, indent=2))
        return 0 if report["verified"] else 1
    if args.command in ("serve", "mcp", "keys"):
        from lightmem.cli import serve

        return serve.dispatch(args, load_config(args))
    with LightMemory.from_config(load_config(args)) as mem:
        if args.command == "add":
            return _add(mem, args)
        if args.command == "search":
            filters = {"speaker": args.speaker} if args.speaker else None
            kw: dict[str, Any] = {
                "limit": args.limit,
                "filters": filters,
                "mode": args.mode,
                "budget_tokens": args.budget_tokens,
                **_scope(args),
            }
            if args.context:
                print(mem.retrieve_context(args.query, **kw))
            else:
                for r in mem.retrieve(args.query, **kw):
                    print(json.dumps(r.to_dict(), ensure_ascii=False))
            return 0
        if args.command == "show":
            entry = mem.get(args.id, **_scope(args))
            sources = [
                {"id": m.id, "speaker": m.speaker, "content": m.content, "time": m.time_text}
                for m in mem.sources(args.id, **_scope(args))
            ]
            print(json.dumps({**entry.to_dict(), "sources": sources}, indent=2, ensure_ascii=False))
            return 0
        if args.command == "history":
            for ev in mem.history(args.id, **_scope(args)):
                print(json.dumps(ev.to_dict(), ensure_ascii=False))
            return 0
        if args.command == "purge":
            print(json.dumps(mem.purge(args.id, **_scope(args)).to_dict(), indent=2))
            return 0
        if args.command == "stats":
            print(json.dumps(mem.stats(**_scope(args)), indent=2))
            return 0
    raise InvalidInputError(f"command: unknown command {args.command!r}")  # pragma: no cover


def _read_messages(path: str) -> list[Any]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError(f"file: cannot read {path}: {exc}") from exc
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            data = json.loads(text)
        else:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise InvalidInputError(f"file: {path} is not JSON or JSONL: {exc}") from exc
    if not isinstance(data, list):
        raise InvalidInputError(f"file: {path} must hold a list of messages")
    return data


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _add(mem: LightMemory, args: argparse.Namespace) -> int:
    from tqdm import tqdm

    messages = _read_messages(args.file)
    created = 0
    with tqdm(total=len(messages), unit="msg", disable=len(messages) < 200, file=sys.stderr) as bar:
        for batch in _batches(messages, args.batch):
            created += len(mem.add_memory(batch, **_scope(args)).entries_created)
            bar.update(len(batch))
    if not args.no_flush:
        created += len(mem.flush(**_scope(args)).entries_created)
    print(json.dumps({"messages": len(messages), "entries_created": created}))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``lightmem`` command line: the parser, and dispatch to the demo, the memory commands
(``memory_commands``), the servers (``serve``) and the benchmarks (``bench``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from lightmem.cli import memory_commands, reembed
from lightmem.cli.args import count, load_config
from lightmem.cli.bench import add_bench_parser, run_bench
from lightmem.config import MAX_STORE_MB
from lightmem.errors import LightMemError
from lightmem.memory import LightMemory
from lightmem.pipeline.messages import MAX_MESSAGES

__all__ = ["main"]

_ALL_SCOPES = "read every user's, agent's and run's memories (a store holding several)"
_DSN_HELP = "PostgreSQL DSN: tenants and keys there instead of --data-dir (or $LIGHTMEM_PG_DSN)"


def _tenant_args(p: argparse.ArgumentParser, data_help: str = "tenant stores and keys") -> None:
    """``--data-dir`` and ``--dsn``, shared by every command that serves or manages tenants."""
    p.add_argument(
        "--data-dir", default=os.environ.get("LIGHTMEM_DATA_DIR", "lightmem-data"), help=data_help
    )
    p.add_argument("--dsn", default=None, help=_DSN_HELP)


def _limit_arg(p: argparse.ArgumentParser) -> None:
    """``--tenant-max-mb``, for the commands that serve tenants."""
    p.add_argument(
        "--tenant-max-mb",
        type=count(1, MAX_STORE_MB),
        default=None,
        help="size limit of each tenant's store in MiB: past it adding is refused with 507 "
        "(default: $LIGHTMEM_TENANT_MAX_MB, else none)",
    )


def _memory_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
) -> argparse.ArgumentParser:
    """A command on the --store file; each prints for people, or JSON with ``--json``."""
    p = sub.add_parser(name, help=help_text)
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    return p


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

    a = _memory_command(sub, "add", "add a conversation from a JSON or JSONL file ('-' = stdin)")
    a.add_argument("file")
    a.add_argument(
        "--batch", type=count(1, MAX_MESSAGES), default=64, help="messages per add_memory call"
    )
    a.add_argument("--no-flush", action="store_true", help="leave the tail buffered")

    s = _memory_command(sub, "search", "retrieve memories for a query, best first")
    s.add_argument("query")
    s.add_argument(
        "--limit",
        type=count(1),
        help="at most this many (default: --config's retrieval.limit, else 10)",
    )
    s.add_argument("--mode", choices=["embedding", "context", "hybrid", "hierarchical"])
    s.add_argument("--budget-tokens", type=count(1))
    s.add_argument("--speaker")
    s.add_argument("--context", action="store_true", help="print formatted prompt context")
    s.add_argument("--all-scopes", action="store_true", help=_ALL_SCOPES)

    ls = _memory_command(sub, "list", "list memories in time order (paginated)")
    ls.add_argument("--limit", type=count(1), default=20)
    ls.add_argument("--offset", type=count(0), default=0)
    ls.add_argument("--kind", choices=["entry", "event", "summary"])
    ls.add_argument("--speaker")
    ls.add_argument("--all-scopes", action="store_true", help=_ALL_SCOPES)

    sh = _memory_command(sub, "show", "show one memory with its source turns")
    sh.add_argument("id", help="the id, or the short id the other commands print")

    h = _memory_command(sub, "history", "show the change history of one memory")
    h.add_argument("id")

    up = _memory_command(sub, "update", "replace a memory's text (the old version is kept)")
    up.add_argument("id")
    up.add_argument("text")

    de = _memory_command(sub, "delete", "delete a memory (restorable)")
    de.add_argument("id")

    re_ = _memory_command(sub, "restore", "bring back a deleted or earlier version of a memory")
    re_.add_argument("id")
    re_.add_argument("--version", type=count(1), help="default: the last version")

    pu = _memory_command(
        sub, "purge", "erase one entry, or everything in --user-id/--agent-id/--run-id, for good"
    )
    pu.add_argument("id", nargs="?", help="the entry to erase (omit to erase the whole scope)")
    pu.add_argument(
        "--node", metavar="NODE_ID", help="erase this FluxMem graph node instead (in the scope)"
    )

    ou = _memory_command(
        sub, "offline-update", "build the update queue, then merge or delete overlapping memories"
    )
    ou.add_argument("--top-k", type=count(1), default=20, help="neighbours considered per memory")
    ou.add_argument("--keep-top-n", type=count(1), default=10, help="neighbours kept per memory")
    ou.add_argument("--score-threshold", type=float, default=0.8, help="cosine similarity cut")
    ou.add_argument(
        "--recheck",
        action="store_true",
        help="show the updater every memory again, also those it saw before unchanged",
    )

    sm = _memory_command(sub, "summarize", "write one summary per time window")
    sm.add_argument("--window", default="7d", help="window length, e.g. 12h, 7d, 2w")
    sm.add_argument(
        "--historical", action="store_true", help="each summary sees the previous window's"
    )

    _memory_command(sub, "stats", "counts and model usage of the store")

    sv = sub.add_parser("serve", help="REST API and viewer (/ui); needs lightmem[server]")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=count(1, 65535), default=8765)
    _tenant_args(sv)
    sv.add_argument(
        "--max-body-mb",
        type=float,
        help="largest request body (default: $LIGHTMEM_MAX_BODY_BYTES, else 8 MB)",
    )
    sv.add_argument(
        "--workers", type=count(1), default=1, help="server processes (share the files)"
    )
    _limit_arg(sv)
    sv.add_argument("--no-access-log", action="store_true", help="no line per request")

    mc = sub.add_parser("mcp", help="MCP server: stdio (the --store file) or streamable HTTP")
    mc.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    mc.add_argument("--host", default="127.0.0.1")
    mc.add_argument("--port", type=count(1, 65535), default=8766)
    _tenant_args(mc, "tenant stores and keys (http)")
    _limit_arg(mc)
    mc.add_argument("--no-access-log", action="store_true", help="no line per request (http)")

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

    reembed.add_parser(sub)
    add_bench_parser(sub)
    return p


#: The exit status of a process killed by SIGPIPE (128 + 13), what ``ls | head`` gives ``ls``.
_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        code = _dispatch(args)
        sys.stdout.flush()  # a reader that went away (``| head``) shows here, not at exit
        return code
    except LightMemError as exc:
        print(f"error: {_in_flags(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _drop_stdout()
        return _BROKEN_PIPE


def _in_flags(message: str) -> str:
    """A library message's advice in the command line's words: the options, not keywords."""
    return message.replace("give user_id to", "give --user-id to").replace(
        "all_scopes=True", "--all-scopes"
    )


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of what is still buffered
    does not fail again (and print a traceback) on the closed pipe."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's StringIO)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


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
    if args.command == "re-embed":
        return reembed.run(args, sys.stdout)
    if args.command in ("serve", "mcp", "keys"):
        from lightmem.cli import serve

        return serve.dispatch(args)
    config = load_config(args)  # its refusals first: they are about the command line
    memory_commands.check_args(args)
    with LightMemory.from_config(config) as mem:
        return memory_commands.run(mem, args, sys.stdout)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

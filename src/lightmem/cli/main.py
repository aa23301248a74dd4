"""``lightmem`` command line: demo, add, search, show, history, stats, bench."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from lightmem.config import build_llm, parse_config
from lightmem.errors import InvalidInputError, LightMemError
from lightmem.ledger import Ledger
from lightmem.memory import LightMemory

_DSN_HELP = "PostgreSQL DSN: tenants and keys there instead of --data-dir (or $LIGHTMEM_PG_DSN)"


def _tenant_args(p: argparse.ArgumentParser, data_help: str = "tenant stores and keys") -> None:
    """``--data-dir`` and ``--dsn``, shared by every command that serves or manages tenants."""
    p.add_argument(
        "--data-dir", default=os.environ.get("LIGHTMEM_DATA_DIR", "lightmem-data"), help=data_help
    )
    p.add_argument("--dsn", default=None, help=_DSN_HELP)


def _count(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum`` (exit 2 with the flag named)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}")
        return value

    parse.__name__ = "count"
    return parse


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
    a.add_argument("--batch", type=_count(1), default=64, help="messages per add_memory call")
    a.add_argument("--no-flush", action="store_true", help="leave the tail buffered")

    s = sub.add_parser("search", help="retrieve memories for a query")
    s.add_argument("query")
    s.add_argument("--limit", type=_count(1), default=10)
    s.add_argument("--mode", choices=["embedding", "context", "hybrid", "hierarchical"])
    s.add_argument("--budget-tokens", type=_count(1))
    s.add_argument("--speaker")
    s.add_argument("--context", action="store_true", help="print formatted prompt context")

    sh = sub.add_parser("show", help="show one entry with its source turns")
    sh.add_argument("id")

    h = sub.add_parser("history", help="show the change history of one entry")
    h.add_argument("id")

    sub.add_parser("stats", help="counts and model usage of the store")

    sv = sub.add_parser("serve", help="REST API and viewer (/ui); needs lightmem[server]")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8765)
    _tenant_args(sv)
    sv.add_argument("--max-body-mb", type=float, default=8.0)
    sv.add_argument(
        "--workers", type=_count(1), default=1, help="server processes (share the files)"
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

    b = sub.add_parser("bench", help="benchmarks (print JSON)")
    bsub = b.add_subparsers(dest="bench", required=True)
    lo = bsub.add_parser("locomo", help="LoCoMo evidence recall within a token budget")
    lo.add_argument("file", help="a LoCoMo JSON file (locomo10.json format)")
    lo.add_argument("--budget-tokens", type=_count(1), default=800)
    lo.add_argument("--out", help="write the full per-question JSON here")
    lo.add_argument(
        "--llm",
        action="store_true",
        help="extract with the configured LLM endpoint (LIGHTMEM_LLM_* or --config)",
    )
    lo.add_argument(
        "--qa", action="store_true", help="answer each question and grade it with an LLM judge"
    )
    _local_llm_options(lo)
    lo.add_argument("--samples", type=_count(1), help="only the first N conversations")
    lo.add_argument("--limit-turns", type=_count(1), help="only the first N turns of each")
    fm = bsub.add_parser("fluxmem", help="FluxMem stage ablation: table tasks or TextWorldExpress")
    fm.add_argument("--env", choices=["tables", "twx"], default="tables")
    fm.add_argument("--seeds", type=_count(1), default=5, help="how many seeds (medians reported)")
    fm.add_argument("--first-seed", type=_count(0), default=0)
    fm.add_argument("--train", type=_count(1), help="training tasks/games (tables 40, twx 20)")
    fm.add_argument("--test", type=_count(1), help="held-out tasks/games (tables 60, twx 20)")
    fm.add_argument("--games", default="cookingworld,twc,coin,mapreader", help="twx games")
    fm.add_argument("--param", action="append", default=[], help="twx: game:key=value")
    fm.add_argument("--rounds", type=_count(1), default=5, help="twx: Stage II retries per game")
    fm.add_argument(
        "--llm",
        action="store_true",
        help="twx: FluxMem's judgements by the configured LLM (the player stays programmatic)",
    )
    fm.add_argument("--plot", help="write the PEMS curves as a PNG here")
    fm.add_argument("--scale", action="store_true", help="also time Stage I on 10k facts")
    fm.add_argument("--dsn", help="with --scale: the graph in PostgreSQL at this DSN")
    fm.add_argument("--out", help="write the full JSON (every seed) here")
    se = bsub.add_parser("serve", help="REST under concurrent clients; MCP stdio latency")
    se.add_argument("--memories", type=_count(1), default=10_000)
    se.add_argument("--clients", type=_count(1), default=20)
    se.add_argument("--requests", type=_count(1), default=2_000)
    se.add_argument("--workers", type=_count(1), default=1)
    se.add_argument("--dsn", help="tenants and keys in PostgreSQL at this DSN")
    sc = bsub.add_parser("scale", help="load and search N synthetic memories per backend")
    sc.add_argument("--n", type=_count(100), default=100_000)
    sc.add_argument("--dsn", help="also PostgreSQL at this DSN")
    sc.add_argument(
        "--ef-search",
        default="40,100,200,400",
        help="PostgreSQL HNSW ef_search values to measure (comma-separated)",
    )
    cc = bsub.add_parser("concurrency", help="writer and reader processes on one store")
    cc.add_argument("--writers", type=_count(1), default=4)
    cc.add_argument("--readers", type=_count(0), default=4)
    cc.add_argument("--seconds", type=float, default=60.0)
    cc.add_argument("--dsn", help="PostgreSQL DSN (default: a SQLite file in a temp folder)")
    cr = bsub.add_parser("crash", help="SIGKILL ingestion at random points, then verify")
    cr.add_argument("--kills", type=_count(1), default=200)
    cr.add_argument("--llm", action="store_true", help="the LLM pipeline, against the stub")
    so = bsub.add_parser("soak", help="long mixed workload: RSS growth and latency drift")
    so.add_argument("--minutes", type=float, default=30.0)
    so.add_argument("--out", help="write every window as JSON here")
    rs = bsub.add_parser("rss", help="peak RSS of one REST add of huge messages (child processes)")
    rs.add_argument("--case", action="append", choices=["baseline", "huge", "mixed", "reopen"])
    rs.add_argument("--as-limit-gb", type=float, default=4.0, help="prlimit --as per child")
    co = bsub.add_parser("cost", help="LLM calls and prompt tokens per turn, via the stub server")
    co.add_argument("file", help="a LoCoMo JSON file (locomo10.json format)")
    co.add_argument("--samples", type=_count(1), default=1, help="conversations to ingest")
    co.add_argument("--endpoint", help="a real OpenAI-compatible endpoint instead of the stub")
    co.add_argument("--model", default="", help="with --endpoint: the model name")
    co.add_argument("--limit-turns", type=_count(1), help="only the first N turns of each")
    _local_llm_options(co)
    return p


def _local_llm_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--local-gguf",
        help="serve this GGUF model (or 'smollm2') with llama.cpp on 127.0.0.1 (lightmem[local])",
    )
    sp.add_argument("--context-tokens", type=_count(256), default=2048, help="with --local-gguf")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except LightMemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


_READ_COMMANDS = ("search", "show", "history", "stats")


def _config(args: argparse.Namespace) -> dict[str, Any]:
    """The library config: ``--config``'s file, with ``--store`` as its store unless the file
    names one. A ``--store`` that contradicts the file's store is refused, and so (for read
    commands) is a store file that does not exist, rather than creating an empty one."""
    cfg: dict[str, Any] = {}
    if args.config:
        try:
            cfg = json.loads(Path(args.config).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInputError(f"--config: cannot read {args.config}: {exc}") from exc
        if not isinstance(cfg, dict):
            raise InvalidInputError(f"--config: {args.config} must hold a JSON object")
    named = "store" in cfg or "embedding_retriever" in cfg
    if not named:
        default = os.environ.get("LIGHTMEM_STORE", "lightmem.db")
        cfg["store"] = {"path": args.store if args.store is not None else default}
    settings = parse_config(cfg)
    path = settings.store_path if settings.store_provider == "sqlite" else None
    if named and args.store is not None and (path is None or Path(path) != Path(args.store)):
        where = repr(path) if path is not None else "a PostgreSQL store"
        raise InvalidInputError(
            f"--store: {args.store!r} conflicts with {where} in --config {args.config}; give one"
        )
    if path is not None and args.command in _READ_COMMANDS and not Path(path).exists():
        flag = "--store" if not named else "--config"
        raise InvalidInputError(f"{flag}: no lightmem store at {path!r}; 'add' creates one")
    return cfg


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
        return _bench(args)
    if args.command == "migrate":
        from lightmem.store.migrate import migrate

        report = migrate(args.source, args.target, schema=args.schema, skip_graph=args.skip_graph)
        print(json.dumps(report, indent=2))
        return 0 if report["verified"] else 1
    if args.command in ("serve", "mcp", "keys"):
        from lightmem.cli import serve

        return serve.dispatch(args, _config(args))
    with LightMemory.from_config(_config(args)) as mem:
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


def _bench(args: argparse.Namespace) -> int:
    from lightmem.bench import cost

    if args.bench == "fluxmem" and args.env == "twx":
        from lightmem.bench import fluxmem_twx, twx_env

        args.train, args.test = args.train or 20, args.test or 20
        games = twx_env.parse_games(args.games, args.param)
        reasoner = None
        if args.llm:
            from lightmem.fluxmem import LLMReasoner

            mm = (_config(args) if args.config else {}).get("memory_manager")
            client = build_llm(
                parse_config({"memory_manager": mm or {"model_name": "openai"}}), Ledger()
            )
            reasoner = LLMReasoner(client) if client is not None else None
        result = fluxmem_twx.run(
            games,
            seeds=args.seeds,
            first_seed=args.first_seed,
            train=args.train,
            test=args.test,
            rounds=args.rounds,
            reasoner=reasoner,
        )
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=1))
        for g in result["games"].values():
            g.pop("samples")
        print(json.dumps(result, indent=2))
        return 0
    if args.bench == "fluxmem":
        from lightmem.bench import fluxmem

        args.train, args.test = args.train or 40, args.test or 60
        result = fluxmem.run_seeds(
            args.seeds, first_seed=args.first_seed, train=args.train, test=args.test, plot=args.plot
        )
        if args.scale:
            result["scale"] = fluxmem.scale(dsn=args.dsn)
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=1))
        result.pop("runs")
        print(json.dumps(result, indent=2))
        return 0
    if args.bench == "serve":
        from lightmem.bench import serve as serve_bench

        result = serve_bench.run(
            memories=args.memories,
            clients=args.clients,
            requests=args.requests,
            workers=args.workers,
            dsn=args.dsn,
        )
        print(json.dumps(result, indent=2))
        return 0
    if args.bench == "scale":
        from lightmem.bench import scale

        try:
            efs = tuple(int(x) for x in args.ef_search.split(","))
        except ValueError as exc:
            raise InvalidInputError("--ef-search: comma-separated positive integers") from exc
        if min(efs) < 1:
            raise InvalidInputError("--ef-search: comma-separated positive integers")
        print(json.dumps(scale.run(args.n, dsn=args.dsn, ef_search=efs), indent=2))
        return 0
    if args.bench == "concurrency":
        import tempfile

        from lightmem.bench import concurrency

        with tempfile.TemporaryDirectory(prefix="lightmem-conc-") as tmp:
            schema = f"bench_concurrency_{uuid.uuid4().hex[:8]}"
            store = (
                {"provider": "postgres", "dsn": args.dsn, "schema": schema}
                if args.dsn
                else {"provider": "sqlite", "path": str(Path(tmp) / "conc.db")}
            )
            try:
                result = concurrency.run(
                    store, writers=args.writers, readers=args.readers, seconds=args.seconds
                )
            finally:
                if args.dsn:
                    from lightmem.store.postgres import PostgresStore

                    PostgresStore(args.dsn, schema=schema).drop()
        print(json.dumps(result, indent=2))
        return 0
    if args.bench == "crash":
        from lightmem.bench import crash

        print(json.dumps(crash.run(args.kills, llm=args.llm), indent=2))
        return 0
    if args.bench == "soak":
        from lightmem.bench import soak

        if args.minutes <= 0:
            raise InvalidInputError("--minutes: must be positive")
        result = soak.run(minutes=args.minutes)
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=1))
        result.pop("windows")
        print(json.dumps(result, indent=2))
        return 0
    if args.bench == "rss":
        from lightmem.bench import rss

        if not 0.5 <= args.as_limit_gb <= 64:
            raise InvalidInputError("--as-limit-gb: expected a number in [0.5, 64]")
        print(json.dumps(rss.run(args.case or rss.CASES, limit_gb=args.as_limit_gb), indent=2))
        return 0
    if args.local_gguf:
        with cost.local_model(args.local_gguf, context_tokens=args.context_tokens) as (local, n):
            return _bench_llm(args, local, n)
    endpoint = getattr(args, "endpoint", None)
    llm: dict[str, Any] | None = None
    if endpoint:
        llm = {
            "model_name": "openai",
            "configs": {"openai_base_url": endpoint, "model": args.model or "default"},
        }
    return _bench_llm(args, llm, None)


def _bench_llm(
    args: argparse.Namespace, llm: dict[str, Any] | None, count: Callable[[str], int] | None
) -> int:
    from lightmem.bench import cost, locomo

    if args.bench == "cost":
        result = cost.run(
            args.file, samples=args.samples, endpoint=llm, limit_turns=args.limit_turns
        )
        print(json.dumps(result, indent=2))
        return 0
    cfg: dict[str, Any] = {}
    if args.config:
        cfg = _config(args)
        cfg.pop("store", None)
    if llm is not None:
        cfg["memory_manager"] = llm
    if args.llm and "memory_manager" not in cfg:
        cfg["memory_manager"] = {"model_name": "openai"}
    qa_client = None
    if args.qa:
        llm_cfg = {"memory_manager": cfg.get("memory_manager") or {"model_name": "openai"}}
        qa_client = build_llm(parse_config(llm_cfg), Ledger())
    result = locomo.run(
        args.file,
        budget_tokens=args.budget_tokens,
        config=cfg or None,
        qa_client=qa_client,
        progress=lambda msg: print(msg, file=sys.stderr),
        samples=args.samples,
        limit_turns=args.limit_turns,
        count_tokens=count,
    )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False))
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

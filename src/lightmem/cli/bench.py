"""``lightmem bench``: the benchmark subcommands (each prints JSON)."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightmem.cli.args import count, load_config
from lightmem.cli.serve import require_server_extra
from lightmem.config import build_llm, parse_config
from lightmem.errors import InvalidInputError
from lightmem.ledger import Ledger

__all__ = ["add_bench_parser", "local_llm_options", "run_bench"]


def add_bench_parser(sub: Any) -> None:
    """Add ``bench`` and its subcommands to the top-level subparsers ``sub``."""
    b = sub.add_parser("bench", help="benchmarks (print JSON)")
    bsub = b.add_subparsers(dest="bench", required=True)
    lo = bsub.add_parser("locomo", help="LoCoMo evidence recall within a token budget")
    lo.add_argument("file", help="a LoCoMo JSON file (locomo10.json format)")
    lo.add_argument("--budget-tokens", type=count(1), default=800)
    lo.add_argument("--out", help="write the full per-question JSON here")
    lo.add_argument(
        "--llm",
        action="store_true",
        help="extract with the configured LLM endpoint (LIGHTMEM_LLM_* or --config)",
    )
    lo.add_argument(
        "--qa", action="store_true", help="answer each question and grade it with an LLM judge"
    )
    local_llm_options(lo)
    lo.add_argument("--samples", type=count(1), help="only the first N conversations")
    lo.add_argument("--limit-turns", type=count(1), help="only the first N turns of each")
    lo.add_argument("--dsn", help="store on PostgreSQL there (a fresh schema per conversation)")
    fm = bsub.add_parser("fluxmem", help="FluxMem stage ablation: table tasks or TextWorldExpress")
    fm.add_argument("--env", choices=["tables", "twx"], default="tables")
    fm.add_argument("--seeds", type=count(1), default=5, help="how many seeds (medians reported)")
    fm.add_argument("--first-seed", type=count(0), default=0)
    fm.add_argument("--train", type=count(1), help="training tasks/games (tables 40, twx 20)")
    fm.add_argument("--test", type=count(1), help="held-out tasks/games (tables 60, twx 20)")
    fm.add_argument("--games", default="cookingworld,twc,coin,mapreader", help="twx games")
    fm.add_argument("--param", action="append", default=[], help="twx: game:key=value")
    fm.add_argument("--rounds", type=count(1), default=5, help="twx: Stage II retries per game")
    fm.add_argument(
        "--explorer",
        choices=["informed", "plain"],
        help="twx: how every arm explores where memory gives no step (default plain: "
        "issue 17's random untried valid action; informed: reads and takes what it read)",
    )
    fm.add_argument(
        "--llm",
        action="store_true",
        help="twx: the configured LLM chooses every action and makes FluxMem's judgements",
    )
    fm.add_argument("--plot", help="write the PEMS curves as a PNG here")
    fm.add_argument("--scale", action="store_true", help="also time Stage I on 10k facts")
    fm.add_argument("--dsn", help="with --scale: the graph in PostgreSQL at this DSN")
    fm.add_argument("--out", help="write the full JSON (every seed) here")
    se = bsub.add_parser("serve", help="REST under concurrent clients; MCP stdio latency")
    se.add_argument("--memories", type=count(1), default=10_000)
    se.add_argument("--clients", type=count(1), default=20)
    se.add_argument("--requests", type=count(1), default=2_000)
    se.add_argument("--workers", type=count(1), default=1)
    se.add_argument("--dsn", help="tenants and keys in PostgreSQL at this DSN")
    sc = bsub.add_parser("scale", help="load and search N synthetic memories per backend")
    sc.add_argument("--n", type=count(100), default=100_000)
    sc.add_argument("--dsn", help="also PostgreSQL at this DSN")
    sc.add_argument(
        "--ef-search",
        default="40,100,200,400",
        help="PostgreSQL HNSW ef_search values to measure (comma-separated)",
    )
    sc.add_argument("--queries", type=count(20), default=200, help="searches per measurement")
    sc.add_argument("--out", help="also write the JSON here")
    cc = bsub.add_parser("concurrency", help="writer and reader processes on one store")
    cc.add_argument("--writers", type=count(1), default=4)
    cc.add_argument("--readers", type=count(0), default=4)
    cc.add_argument("--seconds", type=float, default=60.0)
    cc.add_argument("--dsn", help="PostgreSQL DSN (default: a SQLite file in a temp folder)")
    cr = bsub.add_parser("crash", help="SIGKILL ingestion at random points, then verify")
    cr.add_argument("--kills", type=count(1), default=200)
    cr.add_argument("--llm", action="store_true", help="the LLM pipeline, against the stub")
    so = bsub.add_parser("soak", help="long mixed workload: RSS growth and latency drift")
    so.add_argument("--minutes", type=float, default=30.0)
    so.add_argument("--out", help="write every window as JSON here")
    rs = bsub.add_parser("rss", help="peak RSS of one REST add of huge messages (child processes)")
    rs.add_argument("--case", action="append", choices=["baseline", "huge", "mixed", "reopen"])
    rs.add_argument("--as-limit-gb", type=float, default=4.0, help="prlimit --as per child")
    co = bsub.add_parser("cost", help="LLM calls and prompt tokens per turn, via the stub server")
    co.add_argument("file", help="a LoCoMo JSON file (locomo10.json format)")
    co.add_argument("--samples", type=count(1), default=1, help="conversations to ingest")
    co.add_argument("--endpoint", help="a real OpenAI-compatible endpoint instead of the stub")
    co.add_argument("--model", default="", help="with --endpoint: the model name")
    co.add_argument("--limit-turns", type=count(1), help="only the first N turns of each")
    local_llm_options(co)


def local_llm_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--local-gguf",
        help="serve this GGUF model (or 'smollm2') with llama.cpp on 127.0.0.1 (lightmem[local])",
    )
    sp.add_argument("--context-tokens", type=count(256), default=2048, help="with --local-gguf")


def run_bench(args: argparse.Namespace) -> int:
    from lightmem.bench import cost

    if args.bench == "fluxmem" and args.env == "twx":
        from lightmem.bench import fluxmem_twx, twx_env

        args.train, args.test = args.train or 20, args.test or 20
        games = twx_env.parse_games(args.games, args.param)
        reasoner, policy = None, None
        if args.llm:
            from lightmem.fluxmem import LLMReasoner

            mm = (load_config(args) if args.config else {}).get("memory_manager")
            client = build_llm(
                parse_config({"memory_manager": mm or {"model_name": "openai"}}), Ledger()
            )
            if client is not None:
                reasoner, policy = LLMReasoner(client), client
        result = fluxmem_twx.run(
            games,
            seeds=args.seeds,
            first_seed=args.first_seed,
            train=args.train,
            test=args.test,
            rounds=args.rounds,
            reasoner=reasoner,
            policy=policy,
            explorer=args.explorer,
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

        require_server_extra("lightmem bench serve", "httpx")
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
        result = scale.run(args.n, dsn=args.dsn, queries=args.queries, ef_search=efs)
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
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

        print(json.dumps(crash.run(args.kills, llm=args.llm, progress=sys.stderr), indent=2))
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
        require_server_extra("lightmem bench rss", "httpx")  # each case serves REST
        report = rss.run(args.case or rss.CASES, limit_gb=args.as_limit_gb)
        print(json.dumps(report, indent=2))
        return 1 if report["failed"] else 0
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
        cfg = load_config(args)
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
        dsn=getattr(args, "dsn", None),
    )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False))
    print(json.dumps(result["summary"], indent=2))
    return 0

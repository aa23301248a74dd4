"""``lightmem re-embed``: recompute every vector of the ``--store`` with another embedder."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from lightmem.cli.args import count, load_config, names_store
from lightmem.config import EMBEDDERS, Settings, build_embedder, build_store, parse_config
from lightmem.errors import InvalidInputError
from lightmem.ledger import Ledger

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "re-embed",
        help="recompute every stored vector with another embedder and switch the store to it",
    )
    new = p.add_mutually_exclusive_group(required=True)
    new.add_argument(
        "--config",
        dest="target_config",
        metavar="FILE",
        help="JSON config whose text_embedder is the new embedder (a store it names must be "
        "this one)",
    )
    new.add_argument("--embedder", choices=EMBEDDERS, help="the new embedder by name")
    p.add_argument("--batch", type=count(1), default=256, help="rows embedded per transaction")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")


def run(args: argparse.Namespace, out: TextIO) -> int:
    current = parse_config(load_config(args))
    target = _target(args, current)
    embedder = build_embedder(target, Ledger())
    with build_store(current) as store:
        report = store.reembed(embedder, batch=args.batch)
        embedder.ledger.save(store.record_usage)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2), file=out)
        return 0
    was = f", was {report.embedder_from}" if report.embedder_from else ""
    print(
        f"Re-embedded {report.entries} memories and {report.nodes} graph nodes with "
        f"{report.embedder_to}{was}.",
        file=out,
    )
    if report.triggers_dropped:
        print(
            f"{report.triggers_dropped} skill triggers were dropped: none of their source "
            "episodes is left to embed.",
            file=out,
        )
    return 0


def _target(args: argparse.Namespace, current: Settings) -> Settings:
    """The settings of the new embedder (``--config`` file or ``--embedder`` name)."""
    if args.embedder is not None:
        return parse_config({"text_embedder": {"model_name": args.embedder}})
    path = args.target_config
    try:
        cfg: Any = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"--config: cannot read {path}: {exc}") from exc
    if not isinstance(cfg, dict):
        raise InvalidInputError(f"--config: {path} must hold a JSON object")
    if "text_embedder" not in cfg:
        raise InvalidInputError(f"--config: {path} has no text_embedder section")
    target = parse_config(cfg)
    if names_store(cfg) and _where(target) != _where(current):
        raise InvalidInputError(
            f"--config: {path} names another store ({_where(target)}) than the one "
            f"re-embedded ({_where(current)})"
        )
    return target


def _where(s: Settings) -> str:
    if s.store_provider == "postgres":
        return f"postgres schema {s.store_schema!r}"
    return repr(str(Path(s.store_path).resolve()))

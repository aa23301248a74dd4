"""Argument helpers shared by the ``lightmem`` commands: counts and the library config."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightmem.config import parse_config
from lightmem.errors import InvalidInputError

__all__ = ["count", "global_options", "load_config", "names_store", "read_config"]


def count(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum`` (and at most ``maximum``), exit 2
    with the flag named."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}")
        return value

    parse.__name__ = "count"
    return parse


_READ_COMMANDS = (
    "search",
    "list",
    "show",
    "history",
    "update",
    "delete",
    "restore",
    "offline-update",
    "summarize",
    "stats",
    "re-embed",
)


def read_config(args: argparse.Namespace) -> dict[str, Any]:
    """``--config``'s file as it is (``{}`` without one)."""
    if not args.config:
        return {}
    try:
        cfg = json.loads(Path(args.config).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"--config: cannot read {args.config}: {exc}") from exc
    if not isinstance(cfg, dict):
        raise InvalidInputError(f"--config: {args.config} must hold a JSON object")
    return cfg


def load_config(args: argparse.Namespace) -> dict[str, Any]:
    """The library config: ``--config``'s file, with ``--store`` as its store unless the file
    names one. A ``--store`` that contradicts the file's store is refused, and so (for read
    commands) is a store file that does not exist, rather than creating an empty one."""
    cfg = read_config(args)
    named = names_store(cfg)
    if not named:
        cfg["store"] = {"path": args.store if args.store is not None else _default_store()}
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


def global_options(args: argparse.Namespace) -> str:
    """The global options in effect, quoted for a shell: what a command printed for the
    user to run next (``delete``'s undo) needs to reach the same store and scope. The store
    is spelled out even when it came from ``$LIGHTMEM_STORE`` or the default, so the line
    still works where that variable is not set."""
    words: list[str] = []
    if args.config:
        words += ["--config", args.config]
    if args.store is not None:
        words += ["--store", args.store]
    elif not names_store(read_config(args)):
        words += ["--store", _default_store()]
    for flag, value in (
        ("--user-id", args.user_id),
        ("--agent-id", args.agent_id),
        ("--run-id", args.run_id),
    ):
        if value is not None:
            words += [flag, value]
    return shlex.join(words)


def _default_store() -> str:
    return os.environ.get("LIGHTMEM_STORE", "lightmem.db")


def names_store(cfg: dict[str, Any]) -> bool:
    """Whether a ``--config`` file names its own store (then ``--store`` only repeats it)."""
    return "store" in cfg or "embedding_retriever" in cfg

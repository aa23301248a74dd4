"""What an offline update pass already asked, so the next one asks only what changed.

Each item an updater is given (a newer entry and the earlier ones shown with it) is
recorded by the store as a digest of the updater's signature, this library's version and
the ids and versions of those entries (every change to an entry bumps its version). A later
pass (a nightly one, or a server's request resumed after its deadline) gives the updater
only the items whose digest differs: the same entries, unchanged, shown to the same
updater, would be decided alike, and with a model each item is paid for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from importlib import metadata

from lightmem.types import MemoryEntry

__all__ = ["DECIDE", "REVIEW", "checks_key", "item_digest"]

#: The stages a digest is recorded for (``update_checks.stage``)
DECIDE = "decide"
REVIEW = "review"


def checks_key(signature: str) -> str:
    """What, besides the entries, a decision depends on: the updater (its ``signature``:
    model, rules) and the library's version (its prompts and detector)."""
    try:
        version = metadata.version("lightmem")
    except metadata.PackageNotFoundError:  # run from a source tree: no recorded version
        version = "source"
    return f"lightmem {version}; {signature}"


def item_digest(
    key: str, newer: MemoryEntry, earlier: Iterable[MemoryEntry], decided: Iterable[str] = ()
) -> str:
    """The digest of one item as the updater is shown it (the order of ``earlier`` counts:
    it is the order of likeness the updater sees)."""
    shown = [key, [newer.id, newer.version], [[e.id, e.version] for e in earlier]]
    shown.append(sorted(decided))
    return hashlib.sha256(json.dumps(shown).encode()).hexdigest()[:32]

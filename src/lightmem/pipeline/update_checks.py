"""What an offline update pass already asked, so the next one asks only what changed.

Each item a :class:`~lightmem.pipeline.update.Signed` updater is given (a newer entry and
the earlier ones shown with it) is recorded by the store as a digest of the updater's
signature, of lightmem's own code and of the ids and versions of those entries (every
change to an entry bumps its version). A later pass (a nightly one, or a server's request
resumed after its deadline) gives the updater only the items whose digest differs: the same
entries, unchanged, shown to the same updater, are taken to be decided alike, and with a
model each item is paid for. An item the updater deferred is not recorded.

What is not captured: an updater whose decision about one item depends on the other items
of the same call (the offline detector lets the first change of a call claim an earlier
entry; a model sees its batch together) may decide an unchanged item differently beside
changed ones than it did before. What such a decision changes bumps a version, so the
items concerned are shown again in the next pass.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from lightmem.types import MemoryEntry

__all__ = ["DECIDE", "REVIEW", "checks_key", "item_digest"]

#: The stages a digest is recorded for (``update_checks.stage``)
DECIDE = "decide"
REVIEW = "review"


def checks_key(signature: str) -> str:
    """What, besides the entries, a decision depends on: the updater (its ``signature``:
    model, rules) and lightmem's code (its prompts, detector and readers), as a digest
    (each check stores it)."""
    shown = f"lightmem {_code()}; {signature}"
    return hashlib.sha256(shown.encode()).hexdigest()[:32]


@functools.cache  # the files of a running process do not change under it
def _code() -> str:
    """A digest of lightmem's source files: an upgrade, or any change to the code that
    decides, shows the updater everything again once."""
    package = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        h.update(path.relative_to(package).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def item_digest(
    key: str, newer: MemoryEntry, earlier: Iterable[MemoryEntry], decided: Iterable[str] = ()
) -> str:
    """The digest of one item as the updater is shown it (the order of ``earlier`` counts:
    it is the order of likeness the updater sees)."""
    shown = [key, [newer.id, newer.version], [[e.id, e.version] for e in earlier]]
    shown.append(sorted(decided))
    return hashlib.sha256(json.dumps(shown).encode()).hexdigest()[:32]
